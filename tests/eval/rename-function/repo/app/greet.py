from app.users import fetch_usr


def greeting(user_id):
    name = fetch_usr(user_id)
    return f"Hello, {name}!" if name else "Hello, stranger!"
