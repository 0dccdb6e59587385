"""The FastAPI application: the API router, the page and its assets, and error answers.

Every user error becomes a 4xx JSON body naming the field (`ErrorBody`); all assets, the API
documentation page included, are served from this package: the page loads nothing from
elsewhere, and its Content-Security-Policy says so.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trainplan import __version__
from trainplan.interfaces.web.answers import ERROR_500, error_answer
from trainplan.interfaces.web.hosts import HostPolicy
from trainplan.interfaces.web.inputs import BodyError
from trainplan.interfaces.web.routes import answer_response, json_response, router
from trainplan.interfaces.web.workers import warm_up
from trainplan.specs.errors import TrainplanError

STATIC = Path(__file__).resolve().parent / "static"
VENDOR = STATIC / "vendor"
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
DOCUMENT_TYPES = ("text/html", "image/svg+xml")  # what a browser runs as a document


def error_response(error: TrainplanError) -> Response:
    """The 4xx answer to a user error."""
    return answer_response(error_answer(error))


def _validation_response(error: RequestValidationError) -> Response:
    """FastAPI's own parameter checks (query strings), in the same shape."""
    first: dict[str, Any] = error.errors()[0] if error.errors() else {}
    loc = [str(part) for part in first.get("loc", ()) if part not in ("query", "body", "path")]
    field = ".".join(loc) or None
    message = str(first.get("msg", "invalid value"))
    body: dict[str, Any] = {"field": field, "message": message, "detail": f"{field}: {message}"}
    body["suggestions"] = []
    return json_response(body, 422)


log = logging.getLogger("trainplan.interfaces.web")


class Guard:
    """The outermost ASGI layer. It answers only the allowed Host headers (web/hosts.py: a 400
    otherwise, before any route runs); sends nosniff and no-referrer on every response, error
    answers included, and the page's Content-Security-Policy (unless the route set its own) and
    frame denial on every HTML or SVG document, static files included; and lets no exception
    reach the server. An unexpected one is logged and becomes a JSON 500 (when no response has
    started yet); re-raising it would make the server drop a kept-alive connection. A client that
    went away mid-body needs no answer."""

    def __init__(self, app: ASGIApp, hosts: HostPolicy) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                if headers.get("content-type", "").startswith(DOCUMENT_TYPES):
                    headers.setdefault("Content-Security-Policy", PAGE_POLICY)
                    headers.setdefault("X-Frame-Options", "DENY")
            await send(message)

        host = next((value for name, value in scope["headers"] if name == b"host"), None)
        if not self.hosts.allows(host):
            await _send_json(
                send_with_headers, 400, error_answer(BodyError(400, self.hosts.refusal(host), "Host"))
            )
            return
        try:
            await self.app(scope, receive, send_with_headers)
        except ClientDisconnect:
            return
        except Exception:
            log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _send_json(send_with_headers, 500, (500, ERROR_500))


async def _send_json(send: Send, status: int, answer: tuple[int, bytes]) -> None:
    body = answer[1]
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardedApp(FastAPI):
    """FastAPI with `Guard` around everything, Starlette's own error middleware included."""

    def __init__(self, *, hosts: HostPolicy, **settings: Any) -> None:
        self.hosts = hosts
        super().__init__(**settings)

    def build_middleware_stack(self) -> ASGIApp:
        return Guard(super().build_middleware_stack(), self.hosts)


@cache
def page_html() -> str:
    """The page, read once."""
    return (STATIC / "index.html").read_text(encoding="utf-8")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the workers' fork server early (its engine import off the first request's time);
    stop every worker when the server stops."""
    warm_up()
    yield
    running = getattr(app.state, "workers", None)
    if running is not None:
        running.close()


def create_app(bound: str | None = None, allowed_hosts: Iterable[str] = ()) -> FastAPI:
    """A new app instance (tests and the server each make their own). It answers the loopback
    names, `bound` (the address it serves on, unless every address) and `allowed_hosts`."""
    app = GuardedApp(
        hosts=HostPolicy(bound, allowed_hosts),
        lifespan=lifespan,
        title="trainplan",
        version=__version__,
        summary="Will this training run fit, how long will it take, and what will it cost?",
        description="The calculator's API. `POST /api/estimate` answers with the same JSON as "
        "`trainplan estimate --json` (bytes, seconds, USD), plus `display` strings and `hints`; "
        "`POST /api/plan` with the same JSON as `trainplan plan --json`.",
        docs_url=None,
        redoc_url=None,
    )
    app.include_router(router)

    @app.exception_handler(TrainplanError)
    async def on_user_error(request: Request, error: TrainplanError) -> Response:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, error: RequestValidationError) -> Response:
        return _validation_response(error)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> Response:
        return Response(ERROR_500, status_code=500, media_type="application/json")

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(
            page_html(), headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-cache"}
        )

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        html, policy = docs_page()
        return HTMLResponse(html, headers={"Content-Security-Policy": policy})

    @app.api_route("/healthz", methods=["GET", "HEAD"], include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


@cache
def docs_page() -> tuple[str, str]:
    """The API documentation page and its Content-Security-Policy: the page's own, with the
    SHA-256 of the page's one inline script (Swagger UI's setup) as the only script allowed
    beside this server's files."""
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="trainplan API",
        swagger_js_url="/static/vendor/swagger-ui-bundle.js",
        swagger_css_url="/static/vendor/swagger-ui.css",
        swagger_favicon_url="/static/favicon.svg",
        swagger_ui_parameters={"validatorUrl": None, "defaultModelsExpandDepth": 0},
    ).body
    html = bytes(page).decode()
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    ]
    policy = PAGE_POLICY.replace("script-src 'self'", "script-src 'self' " + " ".join(hashes))
    return html, policy


def missing_assets() -> list[str]:
    """Vendored browser files missing from this installation (a broken install or checkout)."""
    needed = ("chart.umd.min.js", "swagger-ui-bundle.js", "swagger-ui.css")
    return [name for name in needed if not (VENDOR / name).is_file()]
