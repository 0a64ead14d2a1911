"""Arithmetic for the calculator."""


def add(a, b):
    return a + b
