"""Counts the words of standard input."""

import argparse
import sys


def count_words(text):
    return len(text.split())


def main(argv=None):
    parser = argparse.ArgumentParser(description="Count the words of standard input.")
    parser.parse_args(argv)
    print(count_words(sys.stdin.read()))


if __name__ == "__main__":
    main()
