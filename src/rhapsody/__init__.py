"""rhapsody: a terminal coding agent that keeps its own words across context seams."""

__version__ = "0.1.0"
