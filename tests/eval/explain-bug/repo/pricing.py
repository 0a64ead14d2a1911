"""Coupons: a code and the fraction it takes off."""

COUPONS = {"SAVE10": 0.10, "HALF": 0.50}


def apply_coupon(amount, code):
    """The amount after the coupon's discount (unchanged without a valid code)."""
    return amount * (1 - COUPONS.get(code, 0))
