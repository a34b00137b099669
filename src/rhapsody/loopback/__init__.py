"""The loopback Messages API server and its scripted responders."""
