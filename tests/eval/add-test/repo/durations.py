"""Parse durations such as "90s", "5m" or "1h30m" into seconds."""

import re

_PART = re.compile(r"(\d+)([hms])")
_UNIT = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Return the number of seconds in `text`; raise ValueError if it is not a duration."""
    text = text.strip()
    if not text or _PART.sub("", text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _UNIT[unit] for n, unit in _PART.findall(text))
