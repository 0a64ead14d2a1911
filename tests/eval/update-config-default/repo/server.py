"""A tiny HTTP server for the docs."""

import argparse
import http.server

DEFAULT_PORT = 8000


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Serve the docs.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT})")
    return parser.parse_args(argv)


def main():
    args = parse_args()
    http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port=args.port)


if __name__ == "__main__":
    main()
