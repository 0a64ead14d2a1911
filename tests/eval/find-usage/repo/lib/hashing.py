"""Password hashing."""

import hashlib


def legacy_hash(password):
    """MD5, kept only for accounts that have not logged in since 2019."""
    return hashlib.md5(password.encode()).hexdigest()


def modern_hash(password, salt):
    return hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1).hex()
