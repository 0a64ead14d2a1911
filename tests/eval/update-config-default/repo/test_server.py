import unittest

import server


class ArgsTest(unittest.TestCase):
    def test_explicit_port(self):
        self.assertEqual(server.parse_args(["--port", "9999"]).port, 9999)


if __name__ == "__main__":
    unittest.main()
