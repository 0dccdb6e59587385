"""Serving the web calculator on uvicorn (`trainplan serve`). The CLI imports this module only
when the command runs, and this module knows nothing of the CLI: it returns an exit status."""

from __future__ import annotations

import errno
import socket
import sys
from pathlib import Path

MAX_PORT = 65535


class ServeError(Exception):
    """A reason the server cannot start; already printed, exit with status 2."""


def serve(
    host: str, port: int, scenario: str | None, log_level: str, allowed_hosts: tuple[str, ...] = ()
) -> int:
    """Serve the web calculator and its JSON API (docs at /docs); the exit status."""
    try:
        _serve(host, port, scenario, log_level, allowed_hosts)
    except ServeError:
        return 2
    return 0


def _serve(
    host: str, port: int, scenario: str | None, log_level: str, allowed_hosts: tuple[str, ...]
) -> None:
    if not 1 <= port <= MAX_PORT:
        print(f"error: port (--port): must be between 1 and {MAX_PORT:,} (got {port})", file=sys.stderr)
        raise ServeError
    try:
        import uvicorn

        from trainplan.interfaces.web.app import create_app, missing_assets
        from trainplan.interfaces.web.connections import uvicorn_config
    except ImportError as error:
        print(f"error: the web calculator needs {error.name}: pip install 'trainplan[web]'", file=sys.stderr)
        raise ServeError from None
    query = ""
    if scenario:
        from trainplan.inputs.userfiles import read_mapping
        from trainplan.interfaces.web.display import share_query
        from trainplan.specs.errors import TrainplanError
        from trainplan.specs.scenario import scenario_from_mapping

        try:
            query = "?" + share_query(scenario_from_mapping(read_mapping(Path(scenario), "scenario")))
        except TrainplanError as error:
            print(f"error: {error}", file=sys.stderr)
            raise ServeError from None
    missing = missing_assets()
    if missing:
        print(
            f"note: {', '.join(missing)} missing from the package (reinstall it; in a checkout, "
            "`make assets` restores them): the page works without charts, the API docs page needs them",
            file=sys.stderr,
        )
    listener = _listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"trainplan calculator: http://{shown}:{port}/{query}", flush=True)
    print(f"API docs:              http://{shown}:{port}/docs", flush=True)
    config = uvicorn_config(create_app(host, allowed_hosts), log_level)
    server = uvicorn.Server(config)
    server.run(sockets=[listener])


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is printed: a taken port is a clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)
    except (OSError, OverflowError) as error:
        listener.close()
        if isinstance(error, OverflowError | socket.gaierror) or error.errno is None:
            print(f"error: host (--host): {host!r} is not an address to listen on ({error})", file=sys.stderr)
            raise ServeError from None
        reason = (
            "is already in use" if error.errno == errno.EADDRINUSE else f"cannot be used ({error.strerror})"
        )
        print(
            f"error: port {port} on {host} {reason}: choose another with --port (make run PORT=...)",
            file=sys.stderr,
        )
        raise ServeError from None
    listener.set_inheritable(True)
    return listener
