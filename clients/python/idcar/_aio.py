"""The asyncio client: the same contract as :class:`idcar.Client`, for event loops."""

import asyncio
import json
import time

from . import _layouts
from ._client import (
    _DESCRIBE, CHUNK, Description, IdcarError, ProtocolError, _Buffer, _Retry, answer,
    failure, get_ids_frame, ids_of, parse_header, socket_path,
)


class AsyncClient:
    """An asyncio idcar client; safe for concurrent tasks of one event loop.

    ``await next_id()`` / ``await ids(n)``; ints for the 8-byte layouts, bytes for sno80 and
    muid128. With ``prefetch=K`` IDs come from a buffer refilled by a background task.
    """

    def __init__(self, socket=None, *, timeout=5.0, retry_deadline=5.0, prefetch=0,
                 low_water=None, max_age=1.0):
        self.path = socket_path(socket)
        self.timeout = timeout
        self.retry_deadline = retry_deadline
        self._lock = asyncio.Lock()
        self._conn = None
        self._desc = None
        self._closed = False
        self._buf = _Buffer(prefetch, low_water, max_age) if prefetch > 0 else None
        self._refill_task = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        """Closes the connection, stops the refill and drops prefetched IDs."""
        self._closed = True
        if self._refill_task:
            self._refill_task.cancel()
        if self._buf:
            self._buf.items.clear()
        async with self._lock:
            self._drop()

    def _drop(self):
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None

    async def _exchange(self, frame):
        reader, writer = self._conn
        writer.write(frame)
        await writer.drain()
        head = await reader.readexactly(8)
        width = self._desc.width if self._desc and frame != _DESCRIBE else None
        status, w, length = parse_header(head, width)
        return status, w, await reader.readexactly(length)

    async def _connect(self):
        self._conn = await asyncio.open_unix_connection(self.path)
        status, _w, payload = await self._exchange(_DESCRIBE)
        if status != 0:
            raise ProtocolError(f"describe refused: {payload.decode(errors='replace')}")
        try:
            self._desc = Description(json.loads(payload))
        except (ValueError, KeyError) as e:
            raise ProtocolError(f"bad describe answer: {e}") from None

    async def _once(self, frame):
        if self._conn is None:
            await self._connect()
        return await self._exchange(frame)

    async def _call(self, frame):
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
                    last = answer(status, payload)
                    if isinstance(last, bytes):
                        return width, last
            pause = retry.pause()
            if pause is None:
                raise last
            await asyncio.sleep(pause)

    async def describe(self):
        if self._desc is None:
            await self._call(_DESCRIBE)
        return self._desc

    async def _fetch(self, n):
        out = []
        while len(out) < n:
            count = min(CHUNK, n - len(out))
            width, payload = await self._call(get_ids_frame(count))
            out.extend(ids_of(width, payload, count))
        return out

    async def ids(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError("n must be a positive integer")
        if self._buf is None:
            return await self._fetch(n)
        return [await self.next_id() for _ in range(n)]

    async def next_id(self):
        if self._buf is None:
            return (await self._fetch(1))[0]
        got = self._buf.take(time.monotonic())
        if self._buf.wants_refill() and not self._closed:
            self._buf.refilling = True
            self._refill_task = asyncio.ensure_future(self._refill())
        return got if got is not None else (await self._fetch(1))[0]

    async def _refill(self):
        try:
            want = self._buf.size - len(self._buf.items)
            while want > 0 and not self._closed:
                # Stamped when asked for: the age bound holds however long the answer took.
                count = min(CHUNK, want)
                asked = time.monotonic()
                width, payload = await self._call(get_ids_frame(count))
                if not self._closed:
                    self._buf.add(ids_of(width, payload, count), asked)
                want -= count
        except IdcarError:
            pass  # callers fetch directly and see the error themselves
        finally:
            self._buf.refilling = False

    async def text(self, id_):
        d = await self.describe()
        return _layouts.text(d.layout, id_, d.params)

    async def decode(self, id_):
        d = await self.describe()
        return _layouts.decode(d.layout, id_, d.params)
