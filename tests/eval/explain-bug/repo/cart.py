"""A shopping cart with coupons."""

from pricing import apply_coupon


class Cart:
    def __init__(self, coupon=None):
        self.items = []
        self.coupon = coupon

    def add(self, name, price, quantity=1):
        price = apply_coupon(price, self.coupon)
        self.items.append((name, price, quantity))

    def total(self):
        subtotal = sum(price * quantity for _, price, quantity in self.items)
        return round(apply_coupon(subtotal, self.coupon), 2)
