"""idcar client: unique IDs from the idcar sidecar over its Unix socket.

>>> import idcar
>>> with idcar.Client() as c:          # IDCAR_SOCKET or /tmp/idcar.sock
...     i = c.next_id()                  # an int (lable64, ugd60, si53), bytes (sno80,
...                                      # muid128) or a uuid.UUID (uuid7)
...     print(c.text(i), c.decode(i)["time"])

Typed (PEP 561: the package ships ``py.typed``); checked with ``mypy --strict``.
"""

from ._aio import AsyncClient
from ._client import (
    DEFAULT_SOCKET, BadRequestError, Client, ConnectError, Description, IdcarError,
    ProtocolError, SocketPath, UnavailableError,
)
from ._layouts import (
    Fields, Id, Lable64Fields, Layout, LayoutError, Muid128Fields, Si53Fields, Sno80Fields,
    Ugd60Fields, Uuid7Fields, decode, parse, text,
)

__all__ = [
    "AsyncClient", "BadRequestError", "Client", "ConnectError", "DEFAULT_SOCKET", "Description",
    "Fields", "Id", "IdcarError", "Lable64Fields", "Layout", "LayoutError", "Muid128Fields",
    "ProtocolError", "Si53Fields", "Sno80Fields", "SocketPath", "Ugd60Fields",
    "UnavailableError", "Uuid7Fields", "decode", "parse", "text",
]
__version__ = "0.2.0"
