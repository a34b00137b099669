import contextlib
import io
import tempfile
import unittest
from pathlib import Path

from inventory import (
    InventoryError,
    Item,
    category_report,
    format_money,
    format_report,
    load_items,
    low_stock,
    low_stock_report,
    main,
    parse_item,
    reorder_quantities,
    restock,
    save_items,
    sell,
    total_value,
    value_by_category,
)


def sample():
    return [
        Item("B-100", "bolt", "hardware", 25, 120, 50),
        Item("N-200", "nut", "hardware", 10, 8, 20),
        Item("T-300", "tape measure", "tools", 1250, 3, 2),
    ]


class TotalsTest(unittest.TestCase):
    def test_total_value_sums_price_times_qty(self):
        self.assertEqual(total_value(sample()), 25 * 120 + 10 * 8 + 1250 * 3)

    def test_empty_inventory_is_worth_nothing(self):
        self.assertEqual(total_value([]), 0)

    def test_value_by_category(self):
        self.assertEqual(value_by_category(sample()), {"hardware": 3080, "tools": 3750})


class StockTest(unittest.TestCase):
    def test_low_stock_lists_items_at_or_below_their_level(self):
        self.assertEqual([i.sku for i in low_stock(sample())], ["N-200"])

    def test_sell_refuses_more_than_is_left(self):
        items = sample()
        with self.assertRaises(InventoryError):
            sell(items, "T-300", 4)
        self.assertEqual(sell(items, "T-300", 3).qty, 0)
        self.assertEqual(restock(items, "T-300", 5).qty, 5)

    def test_reorder_quantities_cover_twice_the_level(self):
        self.assertEqual(reorder_quantities(sample()), {"N-200": 32})

    def test_low_stock_report(self):
        self.assertEqual(low_stock_report(sample()), "Reorder:\n  N-200 nut: 8 left (reorder at 20)")


class FilesTest(unittest.TestCase):
    maxDiff = None  # a failing report comparison shows the whole diff

    def test_save_then_load_keeps_every_field(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "stock.csv"
            save_items(sample(), path)
            self.assertEqual(load_items(path), sample())

    def test_main_prints_the_reports(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "stock.csv"
            save_items(sample(), path)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(main([str(path)]), 0)
        self.assertEqual(out.getvalue(), "\n".join([
            "3 items, 131 units, worth $68.30",
            "",
            "SKU     NAME               QTY         VALUE",
            "B-100   bolt               120        $30.00",
            "N-200   nut                  8         $0.80",
            "T-300   tape measure         3        $37.50",
            "TOTAL                                 $68.30",
            "",
            "CATEGORY                 VALUE",
            "tools                   $37.50",
            "hardware                $30.80",
            "",
            "Reorder:",
            "  N-200 nut: 8 left (reorder at 20)",
            "",
        ]))

    def test_parse_item_names_the_bad_field(self):
        row = {"sku": "X-1", "name": "widget", "price_cents": "1.5", "qty": "2"}
        with self.assertRaisesRegex(InventoryError, "price_cents"):
            parse_item(row)


class FormatTest(unittest.TestCase):
    def test_format_money(self):
        self.assertEqual(format_money(123456), "$1,234.56")
        self.assertEqual(format_money(-5), "-$0.05")

    def test_report_lists_every_item_then_the_total(self):
        self.assertEqual(format_report(sample()), "\n".join([
            "SKU     NAME               QTY         VALUE",
            "B-100   bolt               120        $30.00",
            "N-200   nut                  8         $0.80",
            "T-300   tape measure         3        $37.50",
            "TOTAL                                 $68.30",
        ]))

    def test_category_report_puts_the_largest_first(self):
        self.assertEqual(category_report(sample()), "\n".join([
            "CATEGORY                 VALUE",
            "tools                   $37.50",
            "hardware                $30.80",
        ]))


if __name__ == "__main__":
    unittest.main()
