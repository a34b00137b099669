import unittest

from inventory import low_stock, total_value

ITEMS = [
    {"name": "bolt", "price": 2, "qty": 10},
    {"name": "nut", "price": 1, "qty": 2},
]


class InventoryTest(unittest.TestCase):
    def test_total_value(self):
        self.assertEqual(total_value(ITEMS), 22)

    def test_empty_total_is_zero(self):
        self.assertEqual(total_value([]), 0)

    def test_low_stock(self):
        self.assertEqual(low_stock(ITEMS), ["nut"])


if __name__ == "__main__":
    unittest.main()
