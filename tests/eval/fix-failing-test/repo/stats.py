"""Small statistics helpers."""


def mean(values):
    """The arithmetic mean of a non-empty sequence."""
    return sum(values) / len(values)


def median(values):
    """The middle value of a non-empty sequence (the mean of the two middle ones when
    the length is even)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 0:
        return ordered[middle]
    return ordered[middle]
