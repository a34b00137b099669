"""Tests of rhapsody.core.accounting."""
