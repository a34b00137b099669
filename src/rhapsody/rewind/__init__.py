"""Rewind: checkpoints of the working tree in a shadow repository, the points to go back to, restoring them."""
