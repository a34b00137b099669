"""The core: loop, history, seams, figures, window."""
