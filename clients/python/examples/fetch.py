#!/usr/bin/env python3
"""Prints IDs from idcar, one per line, in the server's default text form.

    python3 clients/python/examples/fetch.py --socket /tmp/idcar.sock --count 5 [--prefetch 100]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import idcar  # noqa: E402


class _Parser(argparse.ArgumentParser):
    """Bad flags are a one-line error and exit status 1, as every other failure."""

    def error(self, message):
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)


def main():
    p = _Parser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", help="idcar's socket (default: IDCAR_SOCKET, else /tmp/idcar.sock)")
    p.add_argument("--count", type=int, default=1, help="how many IDs")
    p.add_argument("--prefetch", type=int, default=0, help="prefetch buffer size (0: off)")
    a = p.parse_args()
    if a.count < 1 or a.prefetch < 0:
        print("error: --count must be at least 1 and --prefetch not negative", file=sys.stderr)
        return 1
    try:
        with idcar.Client(a.socket, prefetch=a.prefetch) as c:
            out = [c.text(c.next_id()) for _ in range(a.count)]
    except (idcar.IdcarError, idcar.LayoutError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
