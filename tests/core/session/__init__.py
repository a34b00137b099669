"""Tests of rhapsody.core.session.session."""
