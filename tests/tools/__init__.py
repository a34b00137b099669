"""The tools and the sandbox, attacked for real."""
