"""Tests of rhapsody.core.session."""
