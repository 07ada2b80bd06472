#!/usr/bin/env python3
"""Writes uuid7.jsonl: known answers for idcar's uuid7 layout (docs/layouts.md#uuid7).

Written from the layout's bit table with Python's own integers and its `uuid` module, not with
idcar's code: `python3 tests/vectors/uuid7.py > tests/vectors/uuid7.jsonl`.
"""
import datetime
import json
import uuid

K = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def check(hi, lo):
    return ((((hi * K) & M64) ^ (lo >> 8)) * K & M64) >> 56


def build(ms, counter, cluster, slot, random):
    hi = ms << 16 | 0x7 << 12 | counter >> 10
    lo = 0b10 << 62 | (counter & 0x3FF) << 52 | cluster << 48 | slot << 32 | random << 8
    lo |= check(hi, lo)
    return uuid.UUID(int=hi << 64 | lo)


def time_of(ms):
    t = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    t += datetime.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def ulid(v):
    return "".join(CROCKFORD[(v >> (125 - 5 * i)) & 31] for i in range(26))


CASES = [
    # (unix_ts_ms, counter, cluster, slot, random, note)
    (1795321511038, 1234567, 3, 9, 0xA1B2C3, "a typical ID"),
    (1795321511038, 1234568, 3, 9, 0x000001, "the next ID of the same slot and millisecond"),
    (1795321511039, 17, 3, 9, 0xFFFFFF, "the next millisecond: a new seed"),
    (0, 0, 0, 0, 0, "all fields zero"),
    (1, 1, 1, 1, 1, ""),
    ((1 << 48) - 1, (1 << 22) - 1, 15, 65535, (1 << 24) - 1, "every field at its maximum"),
    (253402300799999, 2097151, 7, 40000, 0x5A5A5A, "the last millisecond RFC 3339 writes"),
    (1700000000000, 2097152, 0, 65535, 0, "the counter's top bit (a seed below 2^21 plus the sequence)"),
    (1577836800000, 1023, 15, 256, 0x123456, "the counter's low ten bits"),
    (1577836800000, 1024, 15, 256, 0x123456, "the counter's first bit in rand_a"),
]

for ms, counter, cluster, slot, random, note in CASES:
    u = build(ms, counter, cluster, slot, random)
    assert u.version == 7 and u.variant == uuid.RFC_4122
    print(json.dumps({
        "unix_ts_ms": ms, "counter": counter, "cluster": cluster, "slot": slot,
        "random": random, "check": u.int & 0xFF, "uuid": str(u), "hex": u.hex,
        "ulid": ulid(u.int), "time": time_of(ms) if ms <= 253402300799999 else None,
        "issuer": "idcar", "note": note,
    }))

# Other generators' version-7 UUIDs: decoded as far as the RFC goes (time), not idcar's.
FOREIGN = [
    ("017f22e2-79b0-7cc3-98c4-dc0c0c07398f", "RFC 9562 appendix A.6"),
]
for text, note in FOREIGN:
    u = uuid.UUID(text)
    assert u.version == 7 and u.variant == uuid.RFC_4122
    hi, lo = u.int >> 64, u.int & M64
    assert check(hi, lo) != lo & 0xFF, "would read as idcar's"
    ms = u.int >> 80
    print(json.dumps({"uuid": text, "hex": u.hex, "unix_ts_ms": ms, "time": time_of(ms),
                      "issuer": "other", "note": note}))

# Text that is not a UUIDv7, with the kind of error idcar gives.
BAD = [
    ("919108f7-52d1-4320-9bac-f847db4148a8", "unrecognised", "version 4 (RFC 9562 appendix A.3)"),
    ("017f22e2-79b0-7cc3-18c4-dc0c0c07398f", "unrecognised", "variant 0 with version 7"),
    ("017f22e2-79b0-7cc3-e8c4-dc0c0c07398f", "unrecognised", "variant 111 (reserved)"),
    ("017f22e2-79b0-7cc3-98c4-dc0c0c07398", "wrong_length", "one digit short"),
    ("017f22e2_79b0-7cc3-98c4-dc0c0c07398f", "bad_char", "not a dash"),
    ("017f22e2-79b0-7cc3-98c4-dc0c0c07398g", "bad_char", "not a hex digit"),
    ("8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "bad_char", "ULID text above 128 bits"),
]
for text, kind, note in BAD:
    print(json.dumps({"text": text, "error": kind, "note": note}))
