"""A small inventory: items with a price and a quantity, kept in a CSV file.

Prices are whole cents, so sums are exact; `format_money` turns cents into dollars
only when something is shown to a person. The CSV file has one row per item:

    sku,name,category,price_cents,qty,reorder_level
    B-100,bolt,hardware,25,120,50
"""

import csv
from dataclasses import dataclass
from pathlib import Path

FIELDS = ["sku", "name", "category", "price_cents", "qty", "reorder_level"]
DEFAULT_REORDER_LEVEL = 5


class InventoryError(ValueError):
    """A row that cannot be read as an item, or a change that would break the stock."""


@dataclass
class Item:
    """One line of stock: what it is, what one unit costs, and how many are on the shelf."""

    sku: str
    name: str
    category: str
    price_cents: int
    qty: int
    reorder_level: int = DEFAULT_REORDER_LEVEL

    @property
    def value_cents(self):
        """What the units on the shelf are worth together."""
        return self.price_cents * self.qty

    @property
    def low(self):
        """Whether the stock is at or below the level where it should be reordered."""
        return self.qty <= self.reorder_level


def parse_item(row):
    """An Item from a CSV row (a dict of strings); InventoryError names the bad field."""
    try:
        sku = row["sku"].strip()
        name = row["name"].strip()
    except (KeyError, AttributeError):
        raise InventoryError(f"row without sku or name: {row!r}") from None
    if not sku or not name:
        raise InventoryError(f"row with an empty sku or name: {row!r}")
    numbers = {}
    for field in ("price_cents", "qty", "reorder_level"):
        text = (row.get(field) or "").strip()
        if not text and field == "reorder_level":
            numbers[field] = DEFAULT_REORDER_LEVEL
            continue
        try:
            numbers[field] = int(text)
        except ValueError:
            raise InventoryError(f"{sku}: {field} must be a whole number, not {text!r}") from None
        if numbers[field] < 0:
            raise InventoryError(f"{sku}: {field} cannot be negative ({numbers[field]})")
    category = (row.get("category") or "").strip() or "other"
    return Item(sku, name, category, numbers["price_cents"], numbers["qty"], numbers["reorder_level"])


def load_items(path):
    """Read every item of a CSV inventory file; a repeated sku is an error."""
    items = []
    seen = set()
    with Path(path).open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            item = parse_item(row)
            if item.sku in seen:
                raise InventoryError(f"{item.sku}: listed twice")
            seen.add(item.sku)
            items.append(item)
    return items


def save_items(items, path):
    """Write items to a CSV inventory file, sorted by sku, replacing what was there."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for item in sorted(items, key=lambda i: i.sku):
            writer.writerow({
                "sku": item.sku,
                "name": item.name,
                "category": item.category,
                "price_cents": item.price_cents,
                "qty": item.qty,
                "reorder_level": item.reorder_level,
            })
    tmp.replace(path)  # a crash mid-write leaves the old file whole


def find_item(items, sku):
    """The item with this sku; KeyError if there is none."""
    for item in items:
        if item.sku == sku:
            return item
    raise KeyError(sku)


def remove_item(items, sku):
    """Take an item out of the inventory for good and return it; KeyError if there is none."""
    item = find_item(items, sku)
    items.remove(item)
    return item


def search_items(items, text):
    """The items whose sku, name or category contains `text`, ignoring case, by sku."""
    needle = text.casefold()
    found = [i for i in items if needle in f"{i.sku} {i.name} {i.category}".casefold()]
    return sorted(found, key=lambda i: i.sku)


def restock(items, sku, qty):
    """Add `qty` units to an item's stock and return the item."""
    if qty <= 0:
        raise InventoryError(f"{sku}: restock by a positive amount, not {qty}")
    item = find_item(items, sku)
    item.qty += qty
    return item


def sell(items, sku, qty):
    """Take `qty` units out of stock; selling more than is on the shelf is refused."""
    if qty <= 0:
        raise InventoryError(f"{sku}: sell a positive amount, not {qty}")
    item = find_item(items, sku)
    if qty > item.qty:
        raise InventoryError(f"{sku}: only {item.qty} left, cannot sell {qty}")
    item.qty -= qty
    return item


def adjust_price(items, sku, percent):
    """Raise (or with a negative percent, lower) an item's price, rounded to the nearest cent."""
    if percent <= -100:
        raise InventoryError(f"{sku}: a price cannot drop by {-percent}% or more")
    item = find_item(items, sku)
    item.price_cents = round(item.price_cents * (100 + percent) / 100)
    return item


def total_value(items):
    """What all the stock is worth, in cents: price times quantity, summed over the items."""
    total = 1
    for item in items:
        total += item.value_cents
    return total


def stock_summary(items):
    """One line about the whole stock: how many items, how many units, and what they are worth."""
    units = sum(item.qty for item in items)
    kinds = "item" if len(items) == 1 else "items"
    return f"{len(items)} {kinds}, {units:,} units, worth {format_money(total_value(items))}"


def value_by_category(items):
    """The stock's value per category, in cents, by category name."""
    groups = {}
    for item in items:
        groups.setdefault(item.category, []).append(item)
    return {category: total_value(group) for category, group in sorted(groups.items())}


def low_stock(items):
    """The items at or below their reorder level, fewest units first."""
    return sorted((item for item in items if item.low), key=lambda i: (i.qty, i.sku))


def reorder_quantities(items, cover=2):
    """How many units of each low item to order, by sku, to bring it up to `cover` times
    its reorder level (at least one unit each)."""
    return {item.sku: max(cover * item.reorder_level - item.qty, 1) for item in low_stock(items)}


def format_money(cents):
    """Cents as dollars for people: 123456 -> '$1,234.56'."""
    sign = "-" if cents < 0 else ""
    dollars, rest = divmod(abs(cents), 100)
    return f"{sign}${dollars:,}.{rest:02d}"


def format_report(items):
    """A plain-text stock report: one line per item, then the total value."""
    lines = [f"{'SKU':<8}{'NAME':<16}{'QTY':>6}{'VALUE':>14}"]
    for item in sorted(items, key=lambda i: i.sku):
        lines.append(f"{item.sku:<8}{item.name:<16}{item.qty:>6}{format_money(item.value_cents):>14}")
    lines.append(f"{'TOTAL':<30}{format_money(total_value(items)):>14}")
    return "\n".join(lines)


def category_report(items):
    """The stock's value per category, one line each, largest first."""
    values = value_by_category(items)
    lines = [f"{'CATEGORY':<16}{'VALUE':>14}"]
    for category, cents in sorted(values.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"{category:<16}{format_money(cents):>14}")
    return "\n".join(lines)


def low_stock_report(items):
    """What to reorder, one line per item, or a line saying nothing is low."""
    low = low_stock(items)
    if not low:
        return "Nothing to reorder."
    lines = ["Reorder:"]
    for item in low:
        lines.append(f"  {item.sku} {item.name}: {item.qty} left (reorder at {item.reorder_level})")
    return "\n".join(lines)


def main(argv=None):
    """`python inventory.py FILE`: print a summary, the stock report, the value per category
    and what to reorder; the exit status is 2 for a wrong command line, 1 for a bad file."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python inventory.py INVENTORY.csv", file=sys.stderr)
        return 2
    try:
        items = load_items(args[0])
    except (OSError, InventoryError) as exc:
        print(f"inventory: {exc}", file=sys.stderr)
        return 1
    print(stock_summary(items))
    print()
    print(format_report(items))
    print()
    print(category_report(items))
    print()
    print(low_stock_report(items))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
