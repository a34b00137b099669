"""Tests of rhapsody.core.toolbox."""
