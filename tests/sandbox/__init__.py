"""Tests of rhapsody.sandbox."""
