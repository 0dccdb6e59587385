"""The FastAPI application: the API router, the page and its assets, and error answers.

Every user error becomes a 4xx JSON body naming the field (`ErrorBody`); all assets, the API
documentation page included, are served from this package: the page loads nothing from
elsewhere, and its Content-Security-Policy says so.
"""

from __future__ import annotations

import json
import logging
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
from trainplan.errors import InputError, TrainplanError
from trainplan.web.inputs import BodyError
from trainplan.web.routes import json_response, router

STATIC = Path(__file__).resolve().parent / "static"
VENDOR = STATIC / "vendor"
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def error_response(error: TrainplanError) -> Response:
    """The 4xx answer to a user error."""
    status = error.status if isinstance(error, BodyError) else 422
    field = error.field if isinstance(error, InputError | BodyError) else None
    message = error.message if isinstance(error, InputError | BodyError) else str(error)
    suggestions = list(getattr(error, "suggestions", None) or [])
    body: dict[str, Any] = {
        "field": field,
        "message": message,
        "detail": str(error),
        "suggestions": suggestions,
    }
    return json_response(body, status)


def _validation_response(error: RequestValidationError) -> Response:
    """FastAPI's own parameter checks (query strings), in the same shape."""
    first: dict[str, Any] = error.errors()[0] if error.errors() else {}
    loc = [str(part) for part in first.get("loc", ()) if part not in ("query", "body", "path")]
    field = ".".join(loc) or None
    message = str(first.get("msg", "invalid value"))
    body: dict[str, Any] = {"field": field, "message": message, "detail": f"{field}: {message}"}
    body["suggestions"] = []
    return json_response(body, 422)


ERROR_500 = json.dumps(
    {"field": None, "message": "internal error", "detail": "internal error", "suggestions": []}
).encode()
log = logging.getLogger("trainplan.web")


class Guard:
    """The outermost ASGI layer: nosniff and no-referrer on every response, error answers
    included, and no exception ever reaches the server. An unexpected one is logged and becomes a
    JSON 500 (when no response has started yet); re-raising it would make the server drop a
    kept-alive connection. A client that went away mid-body needs no answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except ClientDisconnect:
            return
        except Exception:
            log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if started:
                return
            await send_with_headers(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(ERROR_500)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": ERROR_500})


class GuardedApp(FastAPI):
    """FastAPI with `Guard` around everything, Starlette's own error middleware included."""

    def build_middleware_stack(self) -> ASGIApp:
        return Guard(super().build_middleware_stack())


@cache
def page_html() -> str:
    """The page, read once."""
    return (STATIC / "index.html").read_text(encoding="utf-8")


def create_app() -> FastAPI:
    """A new app instance (tests and the server each make their own)."""
    app = GuardedApp(
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
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="trainplan API",
            swagger_js_url="/static/vendor/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None, "defaultModelsExpandDepth": 0},
        )

    @app.api_route("/healthz", methods=["GET", "HEAD"], include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def missing_assets() -> list[str]:
    """Vendored browser files missing from this installation (a broken install or checkout)."""
    needed = ("chart.umd.min.js", "swagger-ui-bundle.js", "swagger-ui.css")
    return [name for name in needed if not (VENDOR / name).is_file()]
