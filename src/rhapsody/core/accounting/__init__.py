"""The accounting: prices, windows, token counts, what a session cost and what seams saved or would have."""
