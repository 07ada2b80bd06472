"""idcar client: unique IDs from the idcar sidecar over its Unix socket.

>>> import idcar
>>> with idcar.Client() as c:          # IDCAR_SOCKET or /tmp/idcar.sock
...     i = c.next_id()                  # an int (lable64, ugd60, si53) or bytes (sno80, muid128)
...     print(c.text(i), c.decode(i)["time"])
"""

from ._aio import AsyncClient
from ._client import (
    DEFAULT_SOCKET, BadRequestError, Client, ConnectError, Description, IdcarError,
    ProtocolError, UnavailableError,
)
from ._layouts import LayoutError, decode, text

__all__ = [
    "AsyncClient", "BadRequestError", "Client", "ConnectError", "DEFAULT_SOCKET", "Description",
    "IdcarError", "LayoutError", "ProtocolError", "UnavailableError", "decode", "text",
]
__version__ = "0.1.0"
