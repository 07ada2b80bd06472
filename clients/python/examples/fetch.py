#!/usr/bin/env python3
"""Prints IDs from idcar, one per line, in the server's default text form.

    python3 clients/python/examples/fetch.py --socket /tmp/idcar.sock --count 5 [--prefetch 100] \
        [--retry-deadline 5]

Uses the installed ``idcar`` package (``pip install ./clients/python``): run it with the
Python of the environment it is installed in.
"""

import argparse
import math
import sys
from typing import NoReturn

import idcar


class _Parser(argparse.ArgumentParser):
    """Bad flags are a one-line error and exit status 1, as every other failure."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)


def seconds(text: str) -> float:
    """A decimal number of seconds, 0 or more."""
    try:
        s = float(text)
    except ValueError:
        s = math.nan
    if not math.isfinite(s) or s < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return s


def main() -> int:
    p = _Parser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--socket", help="idcar's socket (default: IDCAR_SOCKET, else /tmp/idcar.sock)")
    p.add_argument("--count", type=int, default=1, help="how many IDs")
    p.add_argument("--prefetch", type=int, default=0, help="prefetch buffer size (0: off)")
    p.add_argument("--retry-deadline", type=seconds, default=5.0, metavar="SECONDS",
                   help="how long to retry an unavailable or unreachable server, in seconds "
                   "(0: no retry)")
    a = p.parse_args()
    count: int = a.count
    prefetch: int = a.prefetch
    socket: str | None = a.socket
    retry_deadline: float = a.retry_deadline
    if count < 1 or prefetch < 0:
        print("error: --count must be at least 1 and --prefetch not negative", file=sys.stderr)
        return 1
    try:
        with idcar.Client(socket, prefetch=prefetch, retry_deadline=retry_deadline) as c:
            out = [c.text(c.next_id()) for _ in range(count)]
    except (idcar.IdcarError, idcar.LayoutError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
