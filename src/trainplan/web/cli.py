"""`trainplan serve`: the web calculator on uvicorn. FastAPI is imported only when it runs."""

from __future__ import annotations

import errno
import socket
import sys

import typer


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario file (YAML or JSON) whose link to print"
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level"),
) -> None:
    """Serve the web calculator and its JSON API (docs at /docs)."""
    try:
        import uvicorn

        from trainplan.web.app import create_app, missing_assets
    except ImportError as error:
        print(f"error: the web calculator needs {error.name}: pip install 'trainplan[web]'", file=sys.stderr)
        raise typer.Exit(2) from None
    query = ""
    if scenario:
        from trainplan.cli import load_scenario_file
        from trainplan.errors import TrainplanError
        from trainplan.scenario import scenario_from_mapping
        from trainplan.web.display import share_query

        try:
            query = "?" + share_query(scenario_from_mapping(load_scenario_file(scenario)))
        except TrainplanError as error:
            print(f"error: {error}", file=sys.stderr)
            raise typer.Exit(2) from None
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
    server = uvicorn.Server(uvicorn.Config(create_app(), log_level=log_level))
    server.run(sockets=[listener])


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is printed: a taken port is a clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)
    except OSError as error:
        listener.close()
        reason = (
            "is already in use" if error.errno == errno.EADDRINUSE else f"cannot be used ({error.strerror})"
        )
        print(
            f"error: port {port} on {host} {reason}: choose another with --port (make run PORT=...)",
            file=sys.stderr,
        )
        raise typer.Exit(2) from None
    listener.set_inheritable(True)
    return listener


def register_serve(app: typer.Typer) -> None:
    """Add the `serve` command to the CLI app."""
    app.command("serve")(serve)


def _register() -> None:
    """Register on `trainplan.cli.app` (this module is imported at the bottom of trainplan.cli)."""
    from trainplan.cli import app

    if not any(command.name == "serve" for command in app.registered_commands):
        register_serve(app)


_register()
