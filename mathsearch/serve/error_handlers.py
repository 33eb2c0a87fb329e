"""The exception handlers of ``mathsearch serve``: every error is the API's JSON error answer.

:func:`install_error_handlers` maps a body that is not JSON to 400, an invalid field to 422
(with every field's reason in ``details``), an HTTP error to its own status, an unknown
equation to 404, a :class:`QueryError` to 422, a :class:`MappingError` to 503, an unavailable
or busy cluster to 503 + ``Retry-After`` and anything else to a JSON 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mathsearch.core.errors import (
    ClusterUnavailableError,
    MappingError,
    QueryError,
    UnknownEquationError,
)
from mathsearch.opensearch.load_shedding import RETRY_AFTER_S
from mathsearch.serve.admission import error

logger = logging.getLogger(__name__)

__all__ = ["install_error_handlers"]

_Handler = Callable[[Request, Any], Awaitable[JSONResponse]]


async def _json_reason(request: Request, found: dict[str, Any]) -> str:
    """``invalid JSON at line L column C: why`` for a body FastAPI could not decode."""
    try:
        json.loads(await request.body())
    except json.JSONDecodeError as exc:
        return f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    except (UnicodeDecodeError, ValueError) as exc:
        return f"invalid JSON: {exc}"
    loc = found.get("loc", ())
    at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
    return f"invalid JSON{at}: {found.get('ctx', {}).get('error', found.get('msg', ''))}"


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    broken = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
    if broken is not None:  # not JSON at all: the request, not a field, is at fault
        return error(400, await _json_reason(request, broken))
    details = [
        {"field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"), "msg": e["msg"]}
        for e in exc.errors()
    ]
    first = details[0] if details else {"field": "", "msg": "invalid request"}
    where = f"{first['field']}: " if first["field"] else ""
    return error(422, f"{where}{first['msg']}", details)


async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    return error(exc.status_code, str(exc.detail))


async def _unknown(_: Request, exc: UnknownEquationError) -> JSONResponse:
    return error(404, str(exc))


async def _query(_: Request, exc: QueryError) -> JSONResponse:
    return error(422, str(exc))


async def _mapping(_: Request, exc: MappingError) -> JSONResponse:
    return error(503, str(exc))


async def _down(_: Request, exc: ClusterUnavailableError) -> JSONResponse:
    # the cluster is down, overloaded or slow (ClusterBusyError): come back later
    response = error(503, str(exc))
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.error("%s %s failed: %r", request.method, request.url.path, exc)
    return error(500, f"internal error ({type(exc).__name__})")


#: Exception class -> its handler, in the order the app registers them.
_HANDLERS: tuple[tuple[type[Exception], _Handler], ...] = (
    (RequestValidationError, _invalid),
    (StarletteHTTPException, _http),
    (UnknownEquationError, _unknown),
    (QueryError, _query),
    (MappingError, _mapping),
    (ClusterUnavailableError, _down),
    (Exception, _unexpected),
)


def install_error_handlers(app: FastAPI) -> None:
    """Register the API's exception handlers on ``app``."""
    for exc_class, handler in _HANDLERS:
        app.add_exception_handler(exc_class, handler)
