#!/usr/bin/env python3
"""IDs per second through the Python client: single calls, then with prefetch 1000.

    python3 clients/python/examples/bench.py --socket /tmp/idcar.sock --seconds 3

Uses the installed ``idcar`` package (``pip install ./clients/python``).
"""

import argparse
import sys
import time

import idcar


def rate(client: idcar.Client, seconds: float) -> float:
    n, end = 0, time.monotonic() + seconds
    start = time.monotonic()
    while time.monotonic() < end:
        for _ in range(100):
            client.next_id()
        n += 100
    return n / (time.monotonic() - start)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket")
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    socket: str | None = a.socket
    seconds: float = a.seconds
    try:
        with idcar.Client(socket) as c:
            print(f"single {rate(c, seconds):.0f}")
        with idcar.Client(socket, prefetch=1000) as c:
            print(f"prefetch {rate(c, seconds):.0f}")
    except idcar.IdcarError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
