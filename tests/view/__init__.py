"""The one renderer: the lines every front end shows."""
