"""Credentials never reach a log record, an exception message or CLI output.

:func:`redact_url` masks the ``user:password@`` part of a URL (OpenSearch or Redis) before it is
written anywhere; the password itself is only ever held in :class:`OpenSearchSettings` (whose repr
leaves it out) and handed to the HTTP client.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

logger = logging.getLogger(__name__)

MASK = "***"


def redact_url(url: str) -> str:
    """``url`` (or comma-separated URLs) with any password replaced by ``***``.

    >>> redact_url("https://admin:s3cret@127.0.0.1:9200")
    'https://admin:***@127.0.0.1:9200'
    >>> redact_url("redis://:pw@localhost:6379/0,http://h:9200")
    'redis://:***@localhost:6379/0,http://h:9200'
    >>> redact_url("http://127.0.0.1:9200")
    'http://127.0.0.1:9200'
    """
    return ",".join(_redact_one(part) for part in url.split(","))


def _redact_one(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK if "@" in url else url
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, has_password, _ = userinfo.partition(":")
    masked = f"{user}:{MASK}" if has_password else user
    return urlunsplit(parts._replace(netloc=f"{masked}@{hostport}"))
