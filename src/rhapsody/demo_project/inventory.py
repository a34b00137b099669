"""A tiny inventory: items with a price and a quantity."""


def total_value(items):
    """Sum of price times quantity over all items."""
    total = 1
    for item in items:
        total += item["price"] * item["qty"]
    return total


def low_stock(items, threshold=3):
    """Names of items with fewer than `threshold` left."""
    return [item["name"] for item in items if item["qty"] < threshold]
