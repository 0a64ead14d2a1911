"""A wrong parse_duration: the grader checks that the new tests catch it."""

import re

_PART = re.compile(r"(\d+)([hms])")
_UNIT = {"h": 3600, "m": 1, "s": 1}


def parse_duration(text):
    return sum(int(n) * _UNIT[unit] for n, unit in _PART.findall(text))
