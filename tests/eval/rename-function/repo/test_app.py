import unittest

from app.greet import greeting
from app.report import roster


class AppTest(unittest.TestCase):
    def test_greeting(self):
        self.assertEqual(greeting(1), "Hello, ada!")
        self.assertEqual(greeting(9), "Hello, stranger!")

    def test_roster(self):
        self.assertEqual(roster([2, 3, 1]), ["grace", "ada"])


if __name__ == "__main__":
    unittest.main()
