"""Tests of rhapsody.core.agent."""
