"""One way to build an OpenSearch client from :class:`OpenSearchSettings`."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from opensearchpy import OpenSearch

from mathsearch.core.redact import redact_url
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)


def connect(settings: OpenSearchSettings | None = None, **overrides: object) -> OpenSearch:
    """Return a client for ``settings.url`` with basic auth and TLS as configured.

    Example::

        client = connect()                      # MATHSEARCH_OPENSEARCH_URL etc.
        client.cluster.health()["status"]
    """
    settings = settings or OpenSearchSettings.from_env()
    parts = urlsplit(settings.urls[0])
    kwargs: dict[str, Any] = {  # opensearch-py's keyword arguments (untyped there)
        "hosts": settings.urls,
        "timeout": settings.timeout,
        "http_compress": False,
        "max_retries": max(3, len(settings.urls)),
        "retry_on_status": (502, 503, 504),
    }
    if settings.user:
        kwargs["http_auth"] = (settings.user, settings.password or "")
    if parts.scheme == "https":
        kwargs["use_ssl"] = True
        kwargs["verify_certs"] = settings.verify_certs
        kwargs["ssl_show_warn"] = settings.verify_certs
        if settings.ca_file:
            kwargs["ca_certs"] = str(settings.ca_file)
    kwargs.update(overrides)
    logger.debug("connecting to %s (user=%s)", redact_url(settings.url), settings.user or "-")
    return OpenSearch(**kwargs)
