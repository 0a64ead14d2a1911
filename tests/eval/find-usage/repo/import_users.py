"""Import accounts from the 2018 export."""

import csv

from lib.hashing import legacy_hash


def load(path):
    with open(path) as f:
        for row in csv.DictReader(f):
            yield row["name"], legacy_hash(row["password"])
