#!/usr/bin/env python3
"""IDs per second through the Python client: single calls, then with prefetch 1000.

    python3 clients/python/examples/bench.py --socket /tmp/idcar.sock --seconds 3
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import idcar  # noqa: E402


def rate(client, seconds):
    n, end = 0, time.monotonic() + seconds
    start = time.monotonic()
    while time.monotonic() < end:
        for _ in range(100):
            client.next_id()
        n += 100
    return n / (time.monotonic() - start)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket")
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    try:
        with idcar.Client(a.socket) as c:
            print(f"single {rate(c, a.seconds):.0f}")
        with idcar.Client(a.socket, prefetch=1000) as c:
            print(f"prefetch {rate(c, a.seconds):.0f}")
    except idcar.IdcarError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
