"""calc: python3 cli.py COMMAND A B"""

import sys

import calc

COMMANDS = {
    "add": calc.add,
}


def main(argv):
    if len(argv) != 3 or argv[0] not in COMMANDS:
        print(f"usage: cli.py {{{'|'.join(COMMANDS)}}} A B", file=sys.stderr)
        return 2
    name, a, b = argv
    print(COMMANDS[name](float(a), float(b)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
