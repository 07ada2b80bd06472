"""The thread-safe client: one connection, describe on connect, retries, optional prefetch."""

import asyncio
import collections
import errno
import json
import os
import socket as _socket
import struct
import threading
import time
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final, NoReturn, Self

from . import _layouts
from ._layouts import Fields, Id

MAGIC: Final = 0xD1
DEFAULT_SOCKET: Final = "/tmp/idcar.sock"
#: Largest count sent in one request (servers accept at least 1,000; larger asks are split).
CHUNK: Final = 1000
_DESCRIBE: Final = bytes([MAGIC, 2, 0, 0])

#: What a socket path may be given as: a str or an ``os.PathLike`` (e.g. ``pathlib.Path``).
SocketPath = str | os.PathLike[str]


class IdcarError(Exception):
    """Anything that went wrong talking to idcar."""


class ConnectError(IdcarError):
    """The socket cannot be reached (missing, refused, permission denied)."""


class UnavailableError(IdcarError):
    """The server cannot issue IDs now (status 2: no lease, mark reached, timed out)."""


class BadRequestError(IdcarError):
    """The server refused the request (status 1); retrying will not help."""


class ProtocolError(IdcarError):
    """The server's answer is not the idcar binary protocol."""


class Description:
    """What a server told about itself: layout, ID width, default text form, parameters."""

    layout: str
    width: int
    form: str
    params: dict[str, str]

    def __init__(self, data: Mapping[str, Any]) -> None:
        """From the describe answer's JSON object."""
        self.layout = str(data["layout"])
        self.width = int(data["width"])
        self.form = str(data.get("form", ""))
        self.params = {str(k): str(v) for k, v in dict(data.get("params", {})).items()}

    def __repr__(self) -> str:
        return f"Description(layout={self.layout!r}, width={self.width}, form={self.form!r})"


def socket_path(socket: SocketPath | None = None) -> str:
    """The socket to use: the argument, else ``IDCAR_SOCKET``, else the server's default."""
    return os.fspath(socket or os.environ.get("IDCAR_SOCKET") or DEFAULT_SOCKET)


def get_ids_frame(count: int) -> bytes:
    return struct.pack(">BBHI", MAGIC, 1, 4, count)


def parse_header(head: bytes, described_width: int | None = None) -> tuple[int, int, int]:
    """(status, width, length) of an 8-byte response header; ProtocolError if malformed."""
    magic, status, width, _reserved, length = struct.unpack(">BBBBI", head)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic byte 0x{magic:02x} in a response")
    if status not in (0, 1, 2):
        raise ProtocolError(f"unknown status {status}")
    if status == 0 and described_width and width != described_width:
        raise ProtocolError(f"response width {width}, the server described {described_width}")
    if length > 64 * 1024 * 1024:
        raise ProtocolError(f"response of {length} bytes")
    return status, width, length


def split_ids(layout: str, width: int, payload: bytes) -> list[Id]:
    """The IDs of an ok payload: ints for 8-byte layouts, ``uuid.UUID`` for uuid7, else bytes."""
    if width == 0 or len(payload) % width:
        raise ProtocolError(f"payload of {len(payload)} bytes is not a multiple of width {width}")
    chunks = [payload[i : i + width] for i in range(0, len(payload), width)]
    if width == 8:
        return [int.from_bytes(c, "big") for c in chunks]
    if layout == "uuid7" and width == 16:
        return [uuid.UUID(bytes=c) for c in chunks]
    return list(chunks)


def answer(status: int, payload: bytes) -> bytes | IdcarError:
    """An ok payload; raises BadRequestError (never retried); or the UnavailableError to retry."""
    reason = payload.decode(errors="replace")
    if status == 0:
        return payload
    if status == 1:
        raise BadRequestError(reason)
    return UnavailableError(f"idcar unavailable: {reason}")


def ids_of(layout: str, width: int, payload: bytes, count: int) -> list[Id]:
    """The ``count`` IDs of a get-IDs payload of a server of ``layout``."""
    got = split_ids(layout, width, payload)
    if len(got) != count:
        raise ProtocolError(f"asked for {count} IDs, got {len(got)}")
    return got


def failure(e: BaseException, path: str, timeout: float,
            timeouts: tuple[type[BaseException], ...] = (_socket.timeout,)) -> IdcarError:
    """What a failed exchange means, for both clients: raises what must not be retried (a
    timeout, a protocol error, permission denied), returns the error to retry on."""
    if isinstance(e, timeouts):
        raise IdcarError(f"{path}: no answer within {timeout} s") from None
    if isinstance(e, ProtocolError):
        raise e
    if isinstance(e, (FileNotFoundError, NotADirectoryError)):
        # A missing socket in an existing directory may yet appear (the server starting); a
        # missing directory will not: the server never creates it.
        where = os.path.dirname(path) or "."
        if not os.path.isdir(where):
            what = "does not exist" if not os.path.exists(where) else "is not a directory"
            raise ConnectError(f"cannot connect to {path}: directory {where} {what}") from None
    if isinstance(e, (FileNotFoundError, ConnectionRefusedError, PermissionError)):
        err = ConnectError(f"cannot connect to {path}: {e.strerror or e}")
        if e.errno in (errno.EACCES, errno.EPERM):
            raise err from None
        return err
    if isinstance(e, (OSError, asyncio.IncompleteReadError)):
        return IdcarError(f"{path}: connection lost: {e}")
    raise e


class _Retry:
    """Exponential backoff (10 ms doubling up to 200 ms) until a deadline."""

    def __init__(self, deadline_s: float) -> None:
        self.end = time.monotonic() + max(deadline_s, 0)
        self.delay = 0.01

    def pause(self) -> float | None:
        """Seconds to sleep before the next try, or None when the deadline has passed."""
        left = self.end - time.monotonic()
        if left <= 0:
            return None
        d = min(self.delay, left)
        self.delay = min(self.delay * 2, 0.2)
        return d


class _Buffer:
    """Prefetched IDs with their fetch time; handed out once, dropped past ``max_age``, and in
    the order the server issued them: one fetch into it at a time (``refilling``: a refill,
    or a caller that found it empty fetching for itself), so nothing is fetched past it."""

    def __init__(self, size: int, low_water: int | None, max_age: float) -> None:
        self.size = size
        self.low_water = size // 4 if low_water is None else low_water
        self.max_age = max_age
        self.items: collections.deque[tuple[Id, float]] = collections.deque()
        self.refilling = False

    def take(self, now: float) -> Id | None:
        while self.items and now - self.items[0][1] > self.max_age:
            self.items.popleft()
        return self.items.popleft()[0] if self.items else None

    def wants_refill(self) -> bool:
        return not self.refilling and len(self.items) <= self.low_water

    def add(self, ids: list[Id], at: float) -> None:
        self.items.extend((i, at) for i in ids)


class Client:
    """A thread-safe idcar client over the Unix socket.

    ``next_id()`` and ``ids(n)`` return ints for the 8-byte layouts (lable64, ugd60, si53),
    bytes for sno80 and muid128 and ``uuid.UUID`` for uuid7; ``text(id)`` and ``decode(id)``
    format and decode them as the server's layout does. With ``prefetch=K`` IDs come from a
    local buffer refilled in the background (see the README for the trade-off).
    """

    path: str
    timeout: float
    retry_deadline: float

    def __init__(self, socket: SocketPath | None = None, *, timeout: float = 5.0,
                 retry_deadline: float = 5.0, prefetch: int = 0, low_water: int | None = None,
                 max_age: float = 1.0) -> None:
        self.path = socket_path(socket)
        self.timeout = timeout
        self.retry_deadline = retry_deadline
        self._lock = threading.Lock()
        self._sock: _socket.socket | None = None
        self._desc: Description | None = None
        self._closed = False
        self._buf = _Buffer(prefetch, low_water, max_age) if prefetch > 0 else None
        self._buf_cond = threading.Condition()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection and drops prefetched IDs."""
        self._closed = True
        with self._buf_cond:
            if self._buf:
                self._buf.items.clear()
            self._buf_cond.notify_all()
        with self._lock:
            self._drop()

    # -- connection ---------------------------------------------------------------------

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    @staticmethod
    def _read_exact(sock: _socket.socket, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionResetError(errno.ECONNRESET, "the server closed the connection")
            data += chunk
        return bytes(data)

    def _exchange(self, sock: _socket.socket, frame: bytes) -> tuple[int, int, bytes]:
        sock.sendall(frame)
        head = self._read_exact(sock, 8)
        width = self._desc.width if self._desc else None
        status, w, length = parse_header(head, width if frame != _DESCRIBE else None)
        return status, w, self._read_exact(sock, length)

    def _connect(self) -> _socket.socket:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
        except OSError as e:
            s.close()
            raise e
        self._sock = s
        status, _w, payload = self._exchange(s, _DESCRIBE)
        if status != 0:
            raise ProtocolError(f"describe refused: {payload.decode(errors='replace')}")
        try:
            self._desc = Description(json.loads(payload))
        except (ValueError, KeyError, TypeError) as e:
            raise ProtocolError(f"bad describe answer: {e}") from None
        return s

    def _call(self, frame: bytes) -> tuple[str, int, bytes]:
        """Sends one request (connecting, retrying as the contract says): (layout, width,
        payload), the layout the connection's server described."""
        if self._closed:
            raise IdcarError("the client is closed")
        retry = _Retry(self.retry_deadline)
        while True:
            with self._lock:
                try:
                    sock = self._sock if self._sock is not None else self._connect()
                    status, width, payload = self._exchange(sock, frame)
                except (OSError, ProtocolError) as e:
                    self._drop()
                    last = failure(e, self.path, self.timeout)
                else:
                    got = answer(status, payload)
                    if isinstance(got, bytes):
                        return self._desc.layout if self._desc else "", width, got
                    last = got
            pause = retry.pause()
            if pause is None:
                raise last
            time.sleep(pause)

    # -- API ----------------------------------------------------------------------------

    def describe(self) -> Description:
        """The server's layout, width, default text form and parameters."""
        if self._desc is None:
            self._call(_DESCRIBE)
        return self._desc or _no_description()

    def _fetch(self, n: int) -> list[Id]:
        out: list[Id] = []
        while len(out) < n:
            count = min(CHUNK, n - len(out))
            layout, width, payload = self._call(get_ids_frame(count))
            out.extend(ids_of(layout, width, payload, count))
        return out

    def ids(self, n: int) -> list[Id]:
        """``n`` IDs (n >= 1), in one or more requests of at most 1,000."""
        if not isinstance(n, int) or n < 1:
            raise ValueError("n must be a positive integer")
        if self._buf is None:
            return self._fetch(n)
        return [self.next_id() for _ in range(n)]

    def next_id(self) -> Id:
        """One ID: from the prefetch buffer when on (refilled in the background), else fetched.

        An ``int`` for lable64, ugd60 and si53; ``bytes`` for sno80 and muid128; a
        ``uuid.UUID`` for uuid7. Prefetched IDs
        are handed out in the order the server issued them: a caller that finds the buffer
        empty waits for the refill in flight, or, with none, fetches one ID itself while no
        refill may start.
        """
        buf = self._buf
        if buf is None:
            return self._fetch(1)[0]
        end = time.monotonic() + self.timeout + self.retry_deadline + 1.0
        with self._buf_cond:
            while True:
                got = buf.take(time.monotonic())
                if got is not None:
                    self._refill_if_low(buf)
                    return got
                if self._closed:
                    raise IdcarError("the client is closed")
                if not buf.refilling:
                    buf.refilling = True
                    break
                left = end - time.monotonic()
                if left <= 0:
                    raise IdcarError(f"{self.path}: no IDs from the prefetch refill in time")
                self._buf_cond.wait(left)
        try:
            return self._fetch(1)[0]
        finally:
            with self._buf_cond:
                buf.refilling = False
                self._buf_cond.notify_all()
                self._refill_if_low(buf)

    def _refill_if_low(self, buf: _Buffer) -> None:
        """Starts a background refill if the buffer is low (called holding ``_buf_cond``)."""
        if buf.wants_refill() and not self._closed:
            buf.refilling = True
            threading.Thread(target=self._refill, args=(buf,), name="idcar-prefetch",
                             daemon=True).start()

    def _refill(self, buf: _Buffer) -> None:
        try:
            with self._buf_cond:
                want = buf.size - len(buf.items)
            while want > 0 and not self._closed:
                # Each chunk is stamped with the moment it was asked for: its IDs were issued
                # no earlier, so the age bound holds however long the answer took.
                count = min(CHUNK, want)
                asked = time.monotonic()
                layout, width, payload = self._call(get_ids_frame(count))
                with self._buf_cond:
                    if not self._closed:
                        buf.add(ids_of(layout, width, payload, count), asked)
                    self._buf_cond.notify_all()
                want -= count
        except IdcarError:
            pass  # a caller that finds the buffer empty fetches and sees the error itself
        finally:
            with self._buf_cond:
                buf.refilling = False
                self._buf_cond.notify_all()

    def text(self, id_: Id) -> str:
        """The ID in the server's default text form."""
        d = self.describe()
        return _layouts.text(d.layout, id_, d.params)

    def decode(self, id_: Id) -> Fields:
        """The ID's fields, as ``idcar decode --json`` prints them."""
        d = self.describe()
        return _layouts.decode(d.layout, id_, d.params)


def _no_description() -> NoReturn:
    raise ProtocolError("connected without a describe answer")
