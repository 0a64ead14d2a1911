from lib import hashing


def reset(user, password, salt):
    user.salt = salt
    user.digest = hashing.modern_hash(password, salt)


def audit(users):
    # legacy_hash is the old MD5 scheme; count who still relies on it.
    return sum(1 for u in users if u.salt is None)
