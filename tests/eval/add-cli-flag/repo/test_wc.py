import unittest

from wc import count_words


class CountTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(count_words("one two\nthree"), 3)


if __name__ == "__main__":
    unittest.main()
