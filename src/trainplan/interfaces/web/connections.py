"""Connection handling that held connections cannot starve: uvicorn's HTTP protocol with a
deadline for every request's headers, a cap on their size, and room made at the connection limit
by closing the longest-idle connection rather than refusing the newcomer.

uvicorn alone closes a kept-alive connection that stays idle (`timeout_keep_alive`), but not one
that never sends a request or sends its headers a byte at a time, and past its
`limit_concurrency` it answers every new request with a 503 while the held connections stay
open. Here:
- a connection must complete each request's headers within HEADER_TIMEOUT_S of being opened or
  of its last response, and they may hold at most MAX_HEADER_BYTES (431 past it);
- past MAX_CONNECTIONS open connections, a new one closes the open connection that has been idle
  (no request in flight: nothing sent yet, unfinished headers, or between kept-alive requests)
  the longest; only when every connection has a request in flight is the newcomer answered
  with a 503 and closed.
The body of a request has its own deadline (web/inputs.py, a 408).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_CONNECTIONS = 512
HEADER_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5.0  # an idle kept-alive connection is closed after this (uvicorn's default)
MAX_HEADER_BYTES = 64 * 1024
LINGER_S = 1.0  # a turned-away connection's input is read and dropped this long before closing


def _plain(status: str, text: str) -> bytes:
    """A whole HTTP response of one line of text, closing the connection."""
    body = text.encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
    return head.encode() + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body


_BUSY_503 = _plain("503 Service Unavailable", "every connection is busy; retry in a few seconds")
_TOO_LARGE_431 = _plain("431 Request Header Fields Too Large", "the request headers exceed 64 KiB")


class HeadersTooLarge(Exception):
    """Raised inside the parser's callbacks past MAX_HEADER_BYTES."""


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines, the size cap and the eviction above."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = False  # a request's headers are complete and its response is not
        self.idle_since = 0.0
        self._header_bytes = 0
        self._too_large = False
        self.turned_away = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.idle_since = self.loop.time()
        self._arm()
        if len(self.connections) > MAX_CONNECTIONS:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_too_slow(self) -> None:
        self._deadline = None
        if not self.in_flight and not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        """Close the longest-idle other connection; with none idle, turn this one away."""
        idle = [
            other
            for other in self.connections
            if other is not self and isinstance(other, GuardedHttp) and not other.in_flight
        ]
        if idle:
            oldest = min(idle, key=lambda other: other.idle_since)
            oldest.transport.close()
            return
        self._turn_away(_BUSY_503)

    def _turn_away(self, answer: bytes) -> None:
        """Answer and stop sending, then read and drop whatever the client still sends for a
        moment before closing: closing with its request unread would reset the connection, and
        the client could lose the answer."""
        self.turned_away = True
        self._disarm()
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if not self.turned_away:
            super().data_received(data)

    def on_message_begin(self) -> None:
        self._header_bytes = 0
        super().on_message_begin()

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > MAX_HEADER_BYTES:
            self._too_large = True
            raise HeadersTooLarge

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.in_flight = True
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.pipeline:  # a pipelined request, started by super(), is still in flight
            self.in_flight = False
            self.idle_since = self.loop.time()
            if not self.transport.is_closing():
                self._arm()

    def send_400_response(self, msg: str) -> None:
        if self._too_large:  # the parser reports our callback's exception as a bad request
            self._turn_away(_TOO_LARGE_431)
            return
        super().send_400_response(msg)


def uvicorn_config(app: Any, log_level: str = "warning", **settings: Any) -> Any:
    """The uvicorn settings every server of the app runs with (`trainplan serve` and the tests'
    live servers): the guarded protocol, no 503 of uvicorn's own, the keep-alive timeout."""
    import uvicorn

    return uvicorn.Config(
        app,
        http=GuardedHttp,
        limit_concurrency=None,
        timeout_keep_alive=int(KEEP_ALIVE_S),
        log_level=log_level,
        **settings,
    )
