"""The user directory."""

USERS = {1: "ada", 2: "grace"}


def fetch_usr(user_id):
    """The name of the user with this id, or None."""
    return USERS.get(user_id)
