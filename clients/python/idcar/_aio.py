"""The asyncio client: the same contract as :class:`idcar.Client`, for event loops."""

import asyncio
import json
import time
from types import TracebackType
from typing import Self

from . import _layouts
from ._client import (
    _DESCRIBE, CHUNK, Description, IdcarError, ProtocolError, SocketPath, _Buffer, _Retry,
    _no_description, answer, failure, get_ids_frame, ids_of, parse_header, socket_path,
)
from ._layouts import Fields, Id

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class AsyncClient:
    """An asyncio idcar client; safe for concurrent tasks of one event loop.

    ``await next_id()`` / ``await ids(n)``; ints for the 8-byte layouts, bytes for sno80 and
    muid128, ``uuid.UUID`` for uuid7. With ``prefetch=K`` IDs come from a buffer refilled by a
    background task.
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
        self._lock = asyncio.Lock()
        self._conn: _Conn | None = None
        self._desc: Description | None = None
        self._closed = False
        self._buf = _Buffer(prefetch, low_water, max_age) if prefetch > 0 else None
        self._refill_task: asyncio.Task[None] | None = None
        self._buf_cond = asyncio.Condition()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection, stops the refill and drops prefetched IDs."""
        self._closed = True
        if self._refill_task:
            self._refill_task.cancel()
        if self._buf:
            self._buf.items.clear()
        async with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None

    async def _exchange(self, conn: _Conn, frame: bytes) -> tuple[int, int, bytes]:
        reader, writer = conn
        writer.write(frame)
        await writer.drain()
        head = await reader.readexactly(8)
        width = self._desc.width if self._desc and frame != _DESCRIBE else None
        status, w, length = parse_header(head, width)
        return status, w, await reader.readexactly(length)

    async def _connect(self) -> _Conn:
        conn = self._conn = await asyncio.open_unix_connection(self.path)
        status, _w, payload = await self._exchange(conn, _DESCRIBE)
        if status != 0:
            raise ProtocolError(f"describe refused: {payload.decode(errors='replace')}")
        try:
            self._desc = Description(json.loads(payload))
        except (ValueError, KeyError, TypeError) as e:
            raise ProtocolError(f"bad describe answer: {e}") from None
        return conn

    async def _once(self, frame: bytes) -> tuple[int, int, bytes]:
        conn = self._conn if self._conn is not None else await self._connect()
        return await self._exchange(conn, frame)

    async def _call(self, frame: bytes) -> tuple[str, int, bytes]:
        """One request (connecting, retrying): (layout, width, payload)."""
        if self._closed:
            raise IdcarError("the client is closed")
        retry = _Retry(self.retry_deadline)
        while True:
            async with self._lock:
                try:
                    status, width, payload = await asyncio.wait_for(self._once(frame), self.timeout)
                except (OSError, ProtocolError, asyncio.TimeoutError,
                        asyncio.IncompleteReadError) as e:
                    self._drop()
                    last = failure(e, self.path, self.timeout, (asyncio.TimeoutError,))
                else:
                    got = answer(status, payload)
                    if isinstance(got, bytes):
                        return self._desc.layout if self._desc else "", width, got
                    last = got
            pause = retry.pause()
            if pause is None:
                raise last
            await asyncio.sleep(pause)

    async def describe(self) -> Description:
        """The server's layout, width, default text form and parameters."""
        if self._desc is None:
            await self._call(_DESCRIBE)
        return self._desc or _no_description()

    async def _fetch(self, n: int) -> list[Id]:
        out: list[Id] = []
        while len(out) < n:
            count = min(CHUNK, n - len(out))
            layout, width, payload = await self._call(get_ids_frame(count))
            out.extend(ids_of(layout, width, payload, count))
        return out

    async def ids(self, n: int) -> list[Id]:
        """``n`` IDs (n >= 1), in one or more requests of at most 1,000."""
        if not isinstance(n, int) or n < 1:
            raise ValueError("n must be a positive integer")
        if self._buf is None:
            return await self._fetch(n)
        return [await self.next_id() for _ in range(n)]

    async def next_id(self) -> Id:
        """One ID: from the prefetch buffer when on (refilled by a background task), else
        fetched. An ``int`` for lable64, ugd60 and si53; ``bytes`` for sno80 and muid128; a
        ``uuid.UUID`` for uuid7.
        Prefetched IDs are handed out in the order the server issued them: a caller that finds
        the buffer empty waits for the refill in flight, or, with none, fetches one ID itself
        while no refill may start."""
        buf = self._buf
        if buf is None:
            return (await self._fetch(1))[0]
        end = time.monotonic() + self.timeout + self.retry_deadline + 1.0
        while True:
            got = buf.take(time.monotonic())
            if got is not None:
                self._refill_if_low(buf)
                return got
            if self._closed:
                raise IdcarError("the client is closed")
            if not buf.refilling:
                break
            try:
                async with self._buf_cond:
                    await asyncio.wait_for(
                        self._buf_cond.wait_for(lambda: bool(buf.items) or not buf.refilling),
                        max(end - time.monotonic(), 0))
            except asyncio.TimeoutError:
                raise IdcarError(f"{self.path}: no IDs from the prefetch refill in time") from None
        buf.refilling = True
        try:
            return (await self._fetch(1))[0]
        finally:
            buf.refilling = False
            await self._changed()
            self._refill_if_low(buf)

    def _refill_if_low(self, buf: _Buffer) -> None:
        if buf.wants_refill() and not self._closed:
            buf.refilling = True
            self._refill_task = asyncio.ensure_future(self._refill(buf))

    async def _changed(self) -> None:
        async with self._buf_cond:
            self._buf_cond.notify_all()

    async def _refill(self, buf: _Buffer) -> None:
        try:
            want = buf.size - len(buf.items)
            while want > 0 and not self._closed:
                # Stamped when asked for: the age bound holds however long the answer took.
                count = min(CHUNK, want)
                asked = time.monotonic()
                layout, width, payload = await self._call(get_ids_frame(count))
                if not self._closed:
                    buf.add(ids_of(layout, width, payload, count), asked)
                await self._changed()
                want -= count
        except IdcarError:
            pass  # a caller that finds the buffer empty fetches and sees the error itself
        finally:
            buf.refilling = False
            await self._changed()

    async def text(self, id_: Id) -> str:
        """The ID in the server's default text form."""
        d = await self.describe()
        return _layouts.text(d.layout, id_, d.params)

    async def decode(self, id_: Id) -> Fields:
        """The ID's fields, as ``idcar decode --json`` prints them."""
        d = await self.describe()
        return _layouts.decode(d.layout, id_, d.params)
