"""Which Host headers the server answers: its defence against DNS rebinding.

A page on another site can make a browser send requests to a server on localhost by pointing
its own domain name at 127.0.0.1; the requests then carry that domain in their Host header. The
server answers only the loopback names, the address it is bound to (any port) and the hosts the
user allowed (`trainplan serve --allowed-host`); bound to every address (0.0.0.0 or ::), only the
loopback names and the allowed hosts, since any name may point at it.
"""

from __future__ import annotations

from collections.abc import Iterable

LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})
WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
HOST_FLAG = "--allowed-host"


def host_name(value: str) -> str:
    """A Host header or an address without its port, lower-cased, an IPv6 address in brackets,
    a fully qualified name's trailing dot dropped."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        return text[: end + 1] if end > 0 else text
    if text.count(":") > 1:  # a bare IPv6 address (a bound host, never a Host header)
        return f"[{text}]"
    return text.partition(":")[0].removesuffix(".")


class HostPolicy:
    """The allowed host names (no ports: any port is answered)."""

    def __init__(self, bound: str | None = None, allowed: Iterable[str] = ()) -> None:
        names = set(LOOPBACK)
        if bound is not None and host_name(bound) not in WILDCARDS:
            names.add(host_name(bound))
        names.update(host_name(name) for name in allowed if name.strip())
        self.names = frozenset(names)

    def allows(self, header: bytes | None) -> bool:
        """Whether a request with this Host header (None: none sent) is answered."""
        if not header:
            return False
        try:
            text = header.decode("ascii")
        except UnicodeDecodeError:
            return False
        return host_name(text) in self.names

    def refusal(self, header: bytes | None) -> str:
        """The message of a refused request."""
        if not header:
            return "the request has no Host header; send one naming this server (localhost)"
        shown = header[:80].decode("ascii", "replace")
        return (
            f"this server does not answer for the host {shown!r} (a guard against DNS rebinding); "
            f"start it with {HOST_FLAG} {host_name(shown)} to allow it"
        )
