from app import users


def roster(ids):
    """One line per known user."""
    return [users.fetch_usr(i) for i in ids if users.fetch_usr(i)]
