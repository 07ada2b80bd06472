"""Text forms and fields of every idcar layout, exactly as ``idcar decode --json`` prints them.

Pure functions of an ID's bytes (and, for si53, the pool's parameters); no I/O.
"""

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Final, Literal, NotRequired, TypedDict, Union, overload

#: An ID as the clients return it: an int for the 8-byte layouts (lable64, ugd60, si53), its
#: big-endian bytes for sno80 (10) and muid128 (16), a ``uuid.UUID`` for uuid7. ``text`` and
#: ``decode`` take any of these forms (a 16-byte ID as bytes, an int or a ``uuid.UUID``).
Id = Union[int, bytes, uuid.UUID]
#: The layouts this client knows.
Layout = Literal["lable64", "ugd60", "si53", "sno80", "muid128", "uuid7"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_UGD60_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_SNO80_ALPHABET: Final = "23456789abcdefghijklmnopqrstuvwx"
_CROCKFORD: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_VALUE: Final[Mapping[str, int]] = {
    **{c: i for i, c in enumerate(_CROCKFORD)}, **{c.lower(): i for i, c in enumerate(_CROCKFORD)},
}
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")
UGD60_EPOCH_S: Final = 1_519_862_400
SNO80_EPOCH_MS: Final = 1_262_304_000_000
SI53_DEFAULT_BASE_CLOCK: Final = 1_577_836_800_000
SI53_DEFAULT_MID_BITS: Final = 5
#: uuid7's check-byte multiplier.
UUID7_CHECK_K: Final = 0x9E3779B97F4A7C15
#: The last millisecond whose time RFC 3339 writes (9999-12-31T23:59:59.999Z): uuid7 IDs with
#: a later time do not decode.
UUID7_LAST_MS: Final = 253_402_300_799_999
_M64: Final = (1 << 64) - 1

#: Bytes per ID of each layout.
WIDTHS: Final[Mapping[str, int]] = {
    "lable64": 8, "ugd60": 8, "si53": 8, "sno80": 10, "muid128": 16, "uuid7": 16,
}
#: The default text form of each layout (the ``form`` of a server's describe answer).
FORMS: Final[Mapping[str, str]] = {
    "lable64": "hex", "ugd60": "b64", "si53": "dec", "sno80": "b32", "muid128": "muid",
    "uuid7": "uuid",
}


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


class Uuid7Fields(TypedDict):
    """A version-7 UUID's fields. ``issuer`` is "idcar" when its check byte is idcar's: then,
    and only then, ``counter``, ``cluster``, ``slot`` and ``random`` are present too."""

    layout: Literal["uuid7"]
    id: str
    hex: str
    unix_ts_ms: int
    time: str
    issuer: Literal["idcar", "other"]
    counter: NotRequired[int]
    cluster: NotRequired[int]
    slot: NotRequired[int]
    random: NotRequired[int]


#: What ``decode`` returns when the layout is known only at run time (e.g. from a server):
#: every variant has ``layout``, ``id`` and ``time``; ``layout`` tells which one it is.
Fields = Union[Lable64Fields, Ugd60Fields, Si53Fields, Sno80Fields, Muid128Fields, Uuid7Fields]


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
    if isinstance(raw, uuid.UUID):
        if want != 16:
            raise LayoutError(f"{layout} IDs are {want} bytes, not a 16-byte UUID")
        return raw.int
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


def _uuid(v: int) -> str:
    h = f"{v:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _ulid(v: int) -> str:
    return "".join(_CROCKFORD[(v >> (125 - 5 * i)) & 31] for i in range(26))


#: The text forms this client writes and reads, per layout: the default form (``FORMS``), and
#: for uuid7 also ``hex`` and ``ulid``.
TEXT_FORMS: Final[Mapping[str, tuple[str, ...]]] = {
    **{layout: (form,) for layout, form in FORMS.items()}, "uuid7": ("uuid", "hex", "ulid"),
}


def _form(layout: str, form: str | None) -> str:
    forms = TEXT_FORMS.get(layout)
    if forms is None:
        raise LayoutError(f"unknown layout {layout!r}")
    if form is None:
        return forms[0]
    if form not in forms:
        raise LayoutError(f"{layout} text form {form!r} is not one of {', '.join(forms)}")
    return form


def text(layout: str, raw: Id, params: Mapping[str, str] | None = None, *,
         form: str | None = None) -> str:
    """An ID (an int, its bytes, or for 16-byte IDs a ``uuid.UUID``) as text: in the layout's
    default form, or in ``form``: the default form's name, or for uuid7 also ``hex`` or
    ``ulid``."""
    v = _value(layout, raw)
    f = _form(layout, form)
    if f == "hex":
        return f"{v:0{2 * WIDTHS[layout]}x}"
    if f == "dec":
        return str(v)
    if f == "b64":
        return _ugd60_display(v)
    if f == "b32":
        return _sno80_b32(v)
    if f == "muid":
        return _muid(v)
    if f == "uuid":
        return _uuid(v)
    return _ulid(v)


def _from_int(layout: str, v: int) -> Id:
    width = WIDTHS[layout]
    if width == 8:
        return v
    if layout == "uuid7":
        return uuid.UUID(int=v)
    return v.to_bytes(width, "big")


def _length(text: str, want: int, what: str) -> None:
    if len(text) != want:
        raise LayoutError(f"expected {want} {what}, got {len(text)} characters: {text!r}")


def _digits(text: str, base: int, alphabet: Mapping[str, int] | str, what: str) -> int:
    """The value of ``text`` read as base-``base`` digits (their values in ``alphabet``, a map
    or a string of the digits in order), most significant first."""
    v = 0
    for pos, c in enumerate(text):
        d = alphabet.get(c) if isinstance(alphabet, Mapping) else alphabet.find(c)
        if d is None or d < 0:
            raise LayoutError(f"{c!r} at position {pos} of {text!r} is not {what}")
        v = v * base + d
    return v


def _hex(text: str, dashes: tuple[int, ...] = (), groups: str = "") -> int:
    """Hex digits, either case, with a ``-`` at each of the positions ``dashes`` (``groups``
    names the grouping for the error)."""
    for pos, c in enumerate(text):
        if pos in dashes:
            if c != "-":
                raise LayoutError(f"{c!r} at position {pos} of {text!r} is not '-' ({groups} "
                                  "hex digits)")
        elif c not in _HEX_DIGITS:
            raise LayoutError(f"{c!r} at position {pos} of {text!r} is not a hex digit")
    return int(text.replace("-", ""), 16)


def _parse_uuid(text: str) -> int:
    _length(text, 36, "characters (8-4-4-4-12 hex digits)")
    return _hex(text, (8, 13, 18, 23), "8-4-4-4-12")


def _parse_ulid(text: str) -> int:
    _length(text, 26, "Crockford base32 characters")
    if _CROCKFORD_VALUE.get(text[0], 0) > 7:
        raise LayoutError(f"{text[0]!r} at position 0 of {text!r} is not 0-7 (26 characters "
                          "hold 130 bits; a UUID has 128)")
    return _digits(text, 32, _CROCKFORD_VALUE,
                   "a Crockford base32 digit (0-9, A-Z without I, L, O, U)")


def _require_v7(v: int) -> int:
    version = (v >> 76) & 15
    if version != 7:
        raise LayoutError(f"not a UUIDv7: version {version}, not 7 (the 13th hex digit of a "
                          "UUIDv7 is 7)")
    variant = (v >> 62) & 3
    if variant != 2:
        raise LayoutError(f"not a UUIDv7: variant bits {variant:02b}, not 10 (the 17th hex digit "
                          "of a UUIDv7 is 8, 9, a or b)")
    return v


@overload
def parse(layout: Literal["lable64", "ugd60", "si53"], text: str, *, form: str | None = None,
          ) -> int: ...
@overload
def parse(layout: Literal["sno80", "muid128"], text: str, *, form: str | None = None,
          ) -> bytes: ...
@overload
def parse(layout: Literal["uuid7"], text: str, *, form: str | None = None) -> uuid.UUID: ...
@overload
def parse(layout: str, text: str, *, form: str | None = None) -> Id: ...


def parse(layout: str, text: str, *, form: str | None = None) -> Id:
    """An ID from its text, as ``next_id()`` returns it (int, bytes or ``uuid.UUID``).

    ``form`` is a form ``text`` writes; without it, the layout's default form, except for
    uuid7, where the text's shape tells the form, as ``idcar decode`` reads it (a ``-``:
    ``uuid``; 32 characters: ``hex``; 26: ``ulid``). Hex and Crockford base32 are read in
    either case. uuid7 text that is not version 7 with RFC 9562's variant is refused
    (``LayoutError``), as is anything that is not the form.
    """
    f = _form(layout, form)
    if layout == "uuid7" and form is None:
        if "-" in text:
            f = "uuid"
        elif len(text) == 32:
            f = "hex"
        elif len(text) == 26:
            f = "ulid"
        else:
            raise LayoutError(f"{text!r} is not a uuid7 ID: expected 36 characters (8-4-4-4-12 "
                              "hex digits), 32 hex digits or 26 Crockford base32 characters")
    if f == "hex":
        _length(text, 2 * WIDTHS[layout], "hex digits")
        v = _hex(text)
    elif f == "dec":
        if not text or len(text) > 20:
            raise LayoutError(f"{text!r} is not a decimal {layout} ID")
        v = _digits(text, 10, "0123456789", "a decimal digit")
    elif f == "b64":
        _length(text, 10, "characters")
        d = _digits(text, 64, _UGD60_ALPHABET, "one of ugd60's 64 characters")
        v = _rev_bits(d >> 28, 32) << 28 | (d & ((1 << 28) - 1))
    elif f == "b32":
        _length(text, 16, "characters")
        v = _digits(text, 32, _SNO80_ALPHABET, "one of sno80's 32 characters")
    elif f == "muid":
        _length(text, 34, "characters (13-11-8 hex digits)")
        v = _hex(text, (13, 25), "13-11-8")
    elif f == "uuid":
        v = _parse_uuid(text)
    else:
        v = _parse_ulid(text)
    if layout == "uuid7":
        _require_v7(v)
    if layout == "si53" and v >= 1 << 53:
        raise LayoutError("si53 IDs are below 2^53")
    if v >= 1 << (8 * WIDTHS[layout]):
        raise LayoutError(f"{text!r} is out of range for {layout}")
    return _from_int(layout, v)


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
def decode(layout: Literal["uuid7"], raw: Id, params: Mapping[str, str] | None = None,
           ) -> Uuid7Fields: ...
@overload
def decode(layout: str, raw: Id, params: Mapping[str, str] | None = None) -> Fields: ...


def decode(layout: str, raw: Id, params: Mapping[str, str] | None = None) -> Fields:
    """The fields of an ID: the same keys and values as ``idcar decode --json``.

    With a literal layout name the result's type is that layout's ``...Fields``; otherwise
    :data:`Fields`, the union of them (``["layout"]`` tells which). An ID its layout cannot
    hold (e.g. a uuid7 ID that is not a version-7 UUID, or dated after 9999) is a
    ``LayoutError``.
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
    if layout == "uuid7":
        return _uuid7_fields(v)
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


def _uuid7_fields(v: int) -> Uuid7Fields:
    _require_v7(v)
    ms = v >> 80
    if ms > UUID7_LAST_MS:
        raise LayoutError(f"unix_ts_ms {ms} is after 9999-12-31T23:59:59.999Z, the last time "
                          "RFC 3339 writes")
    hi, lo = v >> 64, v & _M64
    fields: Uuid7Fields = {
        "layout": "uuid7",
        "id": _uuid(v),
        "hex": f"{v:032x}",
        "unix_ts_ms": ms,
        "time": _time(ms * 1000, 3),
        "issuer": "other",
    }
    # idcar's check byte: the top 8 bits of ((hi × K) XOR (lo >> 8)) × K, modulo 2^64.
    check = (((hi * UUID7_CHECK_K) & _M64) ^ (lo >> 8)) * UUID7_CHECK_K & _M64
    if check >> 56 == lo & 255:
        fields["issuer"] = "idcar"
        fields["counter"] = (hi & 4095) << 10 | (lo >> 52) & 1023
        fields["cluster"] = (lo >> 48) & 15
        fields["slot"] = (lo >> 32) & 65535
        fields["random"] = (lo >> 8) & 16777215
    return fields
