"""Tests of rhapsody.core.access."""
