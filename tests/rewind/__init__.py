"""Tests of rhapsody.rewind."""
