from lib.hashing import legacy_hash, modern_hash


def check(user, password):
    if user.salt is None:
        return legacy_hash(password) == user.digest
    return modern_hash(password, user.salt) == user.digest
