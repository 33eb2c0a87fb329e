"""One line for a cluster that cannot be used at all: unreachable, timed out, refusing the
credentials or failing TLS.

:func:`cluster_fault` finds such a fault of opensearch-py (``ConnectionError`` and its
``ConnectionTimeout`` / ``SSLError``, ``AuthenticationException``, ``AuthorizationException``)
in an exception or in what caused it, and says it in one line that names the cluster's URL and the
setting to change (``MATHSEARCH_OPENSEARCH_URL``, ``_USER`` / ``_PASSWORD``, ``_CA_FILE``,
``_TIMEOUT``), with the root reason (``Connection refused``, ``CERTIFICATE_VERIFY_FAILED``) in
place of opensearch-py's text, which repeats the underlying exception. The command line prints
it instead of a traceback; the typed errors of the search layer carry it.

Example::

    try:
        client.info()
    except Exception as exc:
        line = cluster_fault(exc)   # None: not a connection, TLS or credentials fault
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import sys
from collections.abc import Iterator
from typing import Any

from mathsearch.core.errors import transport_reason
from mathsearch.core.redact import redact_url

logger = logging.getLogger(__name__)

__all__ = [
    "client_url",
    "cluster_fault",
    "configured_url",
    "connection_reason",
    "refused_request",
]

#: ``MATHSEARCH_OPENSEARCH_URL``'s default (``OpenSearchSettings.url``).
DEFAULT_URL = "http://127.0.0.1:9200"
#: urllib3's ``HTTPConnection(host='h', port=1): `` / ``HTTPConnectionPool(...): `` prefix.
_CONNECTION_PREFIX = re.compile(r"^\w*Connection(?:Pool)?\([^)]*\):\s*")


def configured_url() -> str:
    """``MATHSEARCH_OPENSEARCH_URL`` (or its default), credentials masked."""
    return redact_url(os.environ.get("MATHSEARCH_OPENSEARCH_URL") or DEFAULT_URL)


def client_url(client: Any) -> str | None:
    """The hosts of an ``opensearchpy.OpenSearch`` client as URLs (no credentials), comma-
    separated; ``None`` when the client does not say."""
    hosts = getattr(getattr(client, "transport", None), "hosts", None)
    if not isinstance(hosts, list | tuple) or not hosts:
        return None
    urls = []
    for host in hosts:
        if not isinstance(host, dict) or "host" not in host:
            return None
        secure = host.get("use_ssl") or host.get("scheme") == "https"
        port = f":{host['port']}" if host.get("port") else ""
        urls.append(f"{'https' if secure else 'http'}://{host['host']}{port}")
    return ",".join(urls)


def _causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and what it was raised from (``__cause__``, else an unsuppressed context)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


def _inner(exc: BaseException) -> list[BaseException]:
    """The exceptions ``exc`` wraps: opensearch-py's ``info``, urllib3's arguments, causes."""
    found = [getattr(exc, "info", None), exc.__cause__, exc.__context__]
    found += [arg for arg in getattr(exc, "args", ()) if isinstance(arg, BaseException)]
    return [item for item in found if isinstance(item, BaseException)]


def _ssl_reason(exc: ssl.SSLError) -> str:
    reason = getattr(exc, "reason", None) or type(exc).__name__
    message = getattr(exc, "verify_message", None)
    return f"{reason}: {message}" if message else str(reason)


def connection_reason(exc: BaseException) -> str:
    """The root reason of a connection fault, without URLs or repeated exception texts:
    ``Connection refused``, ``CERTIFICATE_VERIFY_FAILED: self-signed certificate``,
    ``Read timed out. (read timeout=30)``, ``Remote end closed connection without response``.

    >>> connection_reason(ConnectionRefusedError(111, "Connection refused"))
    'Connection refused'
    """
    pending, seen = [exc], set()
    strerror = leaf = None
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLError):
            return _ssl_reason(current)
        if isinstance(current, OSError) and current.strerror:
            strerror = current.strerror
        inner = _inner(current)
        if not inner:
            leaf = current
        pending.extend(inner)
    if strerror:
        return strerror
    info = getattr(exc, "info", None)
    if isinstance(info, BaseException) and not any(
        isinstance(arg, BaseException) for arg in info.args
    ):  # urllib3's own message: "HTTPConnectionPool(...): Read timed out. (read timeout=30)"
        text = str(info)
    elif leaf is not None and leaf is not exc:  # "Remote end closed connection without response"
        text = str(leaf)
    else:  # opensearch-py's ("N/A", message, None), or any other exception
        message = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else ""
        text = message or str(exc)
    text = _CONNECTION_PREFIX.sub("", (text.strip().splitlines() or [""])[0])
    return text or type(exc).__name__


def _tls_line(url: str, reason: str) -> str:
    if "WRONG_VERSION_NUMBER" in reason or "record layer failure" in reason:
        hint = "the node speaks plain HTTP: use http:// in MATHSEARCH_OPENSEARCH_URL"
    elif "CERTIFICATE_VERIFY_FAILED" in reason:
        hint = (
            "set MATHSEARCH_OPENSEARCH_CA_FILE to the CA that signed the node's certificate "
            "(or MATHSEARCH_OPENSEARCH_VERIFY_CERTS=0 to skip the check)"
        )
    else:
        hint = "check MATHSEARCH_OPENSEARCH_URL and MATHSEARCH_OPENSEARCH_CA_FILE"
    return f"TLS with OpenSearch at {url} failed ({reason}): {hint}"


def cluster_fault(exc: BaseException, url: str | None = None) -> str | None:
    """One line for a connection, timeout, TLS or credentials fault in ``exc`` or its causes,
    naming ``url`` (default :func:`configured_url`) and the setting to change; ``None`` when
    there is no such fault (nor opensearch-py in this process)."""
    if "opensearchpy" not in sys.modules:  # nothing here can have raised one of its errors
        return None
    from opensearchpy.exceptions import (
        AuthenticationException,
        AuthorizationException,
        ConnectionTimeout,
        SSLError,
    )
    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    for cause in _causes(exc):
        where = url or configured_url()
        if isinstance(cause, AuthenticationException):
            user = os.environ.get("MATHSEARCH_OPENSEARCH_USER")
            return (
                f"OpenSearch at {where} refused the credentials of user {user or '(none)'} "
                f"(HTTP {cause.status_code}): check MATHSEARCH_OPENSEARCH_USER and "
                "MATHSEARCH_OPENSEARCH_PASSWORD (or MATHSEARCH_OPENSEARCH_PASSWORD_FILE)"
            )
        if isinstance(cause, AuthorizationException):
            line = f"OpenSearch at {where} refused the request: {transport_reason(cause)}"
            if "security_exception" in line:
                line += "; check the permissions of MATHSEARCH_OPENSEARCH_USER"
            return line
        if isinstance(cause, SSLError):
            return _tls_line(where, connection_reason(cause))
        if isinstance(cause, ConnectionTimeout):
            return (
                f"OpenSearch at {where} did not answer in time ({connection_reason(cause)}): "
                "raise MATHSEARCH_OPENSEARCH_TIMEOUT or lighten the cluster's load"
            )
        if isinstance(cause, OSConnectionError):
            reason = connection_reason(cause)
            hint = "start it with `mathsearch stack up` or set MATHSEARCH_OPENSEARCH_URL"
            if "closed connection" in reason and where.startswith("http://"):
                hint = "is it an https:// node? set MATHSEARCH_OPENSEARCH_URL"
            return f"OpenSearch at {where} does not answer ({reason}): {hint}"
    return None


def refused_request(exc: BaseException, url: str | None = None) -> str | None:
    """One line for a request the cluster answered with an error (an opensearch-py
    ``TransportError`` with an HTTP status) that nothing turned into a typed error: the
    status, type and reason of its root cause; ``None`` for anything else."""
    if "opensearchpy" not in sys.modules:
        return None
    from opensearchpy.exceptions import TransportError

    if isinstance(exc, TransportError) and isinstance(exc.status_code, int):
        return f"OpenSearch at {url or configured_url()} refused a request: {transport_reason(exc)}"
    return None
