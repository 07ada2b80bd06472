"""Text forms and fields of every idcar layout, exactly as ``idcar decode --json`` prints them.

Pure functions of an ID's bytes (and, for si53, the pool's parameters); no I/O.
"""

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Final, Literal, TypedDict, Union, overload

#: An ID as the clients return it: an int for the 8-byte layouts (lable64, ugd60, si53), its
#: big-endian bytes for sno80 (10) and muid128 (16). ``text`` and ``decode`` take either form.
Id = Union[int, bytes]
#: The layouts this client knows.
Layout = Literal["lable64", "ugd60", "si53", "sno80", "muid128"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_UGD60_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_SNO80_ALPHABET: Final = "23456789abcdefghijklmnopqrstuvwx"
UGD60_EPOCH_S: Final = 1_519_862_400
SNO80_EPOCH_MS: Final = 1_262_304_000_000
SI53_DEFAULT_BASE_CLOCK: Final = 1_577_836_800_000
SI53_DEFAULT_MID_BITS: Final = 5

WIDTHS: Final[Mapping[str, int]] = {"lable64": 8, "ugd60": 8, "si53": 8, "sno80": 10, "muid128": 16}


class LayoutError(ValueError):
    """An ID that is not a valid ID of its layout."""


# The fields ``decode`` returns, per layout: the keys and values of ``idcar decode --json``.

class Lable64Fields(TypedDict):
    layout: Literal["lable64"]
    id: str
    timestamp_ms: int
    sequence: int
    generator: int
    cluster: int
    time: str


class Ugd60Fields(TypedDict):
    layout: Literal["ugd60"]
    id: str
    storage_hex: str
    timestamp_s: int
    worker: int
    seq: int
    random: int
    time: str


class Si53Fields(TypedDict):
    layout: Literal["si53"]
    id: int
    MAB: int
    MID: int
    UIN: int
    base_clock: int
    timestamp_ms: int
    time: str


class Sno80Fields(TypedDict):
    layout: Literal["sno80"]
    id: str
    bytes_hex: str
    units: int
    tick: int
    meta: int
    partition: int
    partition_bytes_hex: str
    sequence: int
    unix_ms: int
    time: str


class Muid128Fields(TypedDict):
    layout: Literal["muid128"]
    id: str
    packed_hex: str
    timestamp: int
    medallion: int
    offset: int
    time: str


#: What ``decode`` returns when the layout is known only at run time (e.g. from a server):
#: every variant has ``layout``, ``id`` and ``time``; ``layout`` tells which one it is.
Fields = Union[Lable64Fields, Ugd60Fields, Si53Fields, Sno80Fields, Muid128Fields]


def _time(unix_us: int, digits: int) -> str:
    """RFC 3339 UTC with ``digits`` (3 or 6) fractional digits, as idcar writes it."""
    secs, us = divmod(unix_us, 1_000_000)
    stamp = (_EPOCH + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{us:06d}"[:digits]
    return f"{stamp}.{frac}Z"


def _rev_bits(v: int, bits: int) -> int:
    return int(format(v, f"0{bits}b")[::-1], 2)


def _value(layout: str, raw: Id) -> int:
    want = WIDTHS.get(layout)
    if want is None:
        raise LayoutError(f"unknown layout {layout!r}")
    if isinstance(raw, int):
        if raw < 0 or raw >= 1 << (8 * want):
            raise LayoutError(f"{raw} is out of range for {layout}")
        return raw
    if len(raw) != want:
        raise LayoutError(f"{layout} IDs are {want} bytes, got {len(raw)}")
    return int.from_bytes(raw, "big")


def _ugd60_display(s: int) -> str:
    v = _rev_bits(s >> 28, 32) << 28 | (s & ((1 << 28) - 1))
    return "".join(_UGD60_ALPHABET[(v >> (54 - 6 * i)) & 63] for i in range(10))


def _sno80_b32(v: int) -> str:
    return "".join(_SNO80_ALPHABET[(v >> (75 - 5 * i)) & 31] for i in range(16))


def _muid(v: int) -> str:
    h = f"{v:032X}"
    return f"{h[:13]}-{h[13:24]}-{h[24:]}"


def text(layout: str, raw: Id, params: Mapping[str, str] | None = None) -> str:
    """The layout's default text form of an ID (an int, or its bytes)."""
    v = _value(layout, raw)
    if layout == "lable64":
        return f"{v:016x}"
    if layout == "si53":
        return str(v)
    if layout == "ugd60":
        return _ugd60_display(v)
    if layout == "sno80":
        return _sno80_b32(v)
    return _muid(v)


def _si53_params(params: Mapping[str, str] | None) -> tuple[int, int]:
    params = params or {}
    base = int(params.get("base-clock", SI53_DEFAULT_BASE_CLOCK))
    mid_bits = int(params.get("mid-bits", SI53_DEFAULT_MID_BITS))
    return base, mid_bits


@overload
def decode(layout: Literal["lable64"], raw: Id, params: Mapping[str, str] | None = None,
           ) -> Lable64Fields: ...
@overload
def decode(layout: Literal["ugd60"], raw: Id, params: Mapping[str, str] | None = None,
           ) -> Ugd60Fields: ...
@overload
def decode(layout: Literal["si53"], raw: Id, params: Mapping[str, str] | None = None,
           ) -> Si53Fields: ...
@overload
def decode(layout: Literal["sno80"], raw: Id, params: Mapping[str, str] | None = None,
           ) -> Sno80Fields: ...
@overload
def decode(layout: Literal["muid128"], raw: Id, params: Mapping[str, str] | None = None,
           ) -> Muid128Fields: ...
@overload
def decode(layout: str, raw: Id, params: Mapping[str, str] | None = None) -> Fields: ...


def decode(layout: str, raw: Id, params: Mapping[str, str] | None = None) -> Fields:
    """The fields of an ID: the same keys and values as ``idcar decode --json``.

    With a literal layout name the result's type is that layout's ``...Fields``; otherwise
    :data:`Fields`, the union of them (``["layout"]`` tells which).
    """
    v = _value(layout, raw)
    if layout == "lable64":
        reserved = (v >> 10) & 63
        if reserved:
            raise LayoutError(f"reserved bits are {reserved}, not zero")
        ms = _rev_bits(v & ~((1 << 22) - 1) & (2**64 - 1), 64)
        return {
            "layout": "lable64",
            "id": f"{v:016x}",
            "timestamp_ms": ms,
            "sequence": (v >> 16) & 63,
            "generator": (v >> 4) & 63,
            "cluster": v & 15,
            "time": _time(ms * 1000, 3),
        }
    if layout == "ugd60":
        if v >= 1 << 60:
            raise LayoutError("ugd60 IDs have 60 bits")
        ts = v >> 28
        return {
            "layout": "ugd60",
            "id": _ugd60_display(v),
            "storage_hex": f"{v:015x}",
            "timestamp_s": ts,
            "worker": (v >> 19) & 511,
            "seq": (v >> 9) & 1023,
            "random": v & 511,
            "time": _time((UGD60_EPOCH_S + ts) * 1_000_000, 3),
        }
    if layout == "si53":
        if v >= 1 << 53:
            raise LayoutError("si53 IDs are below 2^53")
        base, mid_bits = _si53_params(params)
        uin_bits = 13 - mid_bits
        mab = v >> 13
        return {
            "layout": "si53",
            "id": v,
            "MAB": mab,
            "MID": (v >> uin_bits) & ((1 << mid_bits) - 1),
            "UIN": v & ((1 << uin_bits) - 1),
            "base_clock": base,
            "timestamp_ms": base + mab,
            "time": _time((base + mab) * 1000, 3),
        }
    if layout == "sno80":
        head = v >> 16
        units = head >> 25
        unix_ms = SNO80_EPOCH_MS + units * 4
        return {
            "layout": "sno80",
            "id": _sno80_b32(v),
            "bytes_hex": f"{v:020x}",
            "units": units,
            "tick": (head >> 24) & 1,
            "meta": (head >> 16) & 255,
            "partition": head & 65535,
            "partition_bytes_hex": f"{head & 65535:04x}",
            "sequence": v & 65535,
            "unix_ms": unix_ms,
            "time": _time(unix_ms * 1000, 3),
        }
    offset = v & 0xFFFF_FFFF
    if offset >= 1 << 31:
        offset -= 1 << 32
    ts = v >> 76
    return {
        "layout": "muid128",
        "id": _muid(v),
        "packed_hex": f"{v:032x}",
        "timestamp": ts,
        "medallion": (v >> 32) & ((1 << 44) - 1),
        "offset": offset,
        "time": _time(ts, 6),
    }
