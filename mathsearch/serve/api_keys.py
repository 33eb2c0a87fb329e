"""Optional API-key authentication of ``mathsearch serve``.

Auth is on when ``MATHSEARCH_SERVE_API_KEYS_FILE`` (one key a line; blank lines and ``#``
comments skipped) or ``MATHSEARCH_SERVE_API_KEY`` (one key) is set. A request then names its key
as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. The comparison takes the same time
whichever key matches and however much of it does (:func:`hmac.compare_digest` against every
key, no early exit). A key is never logged or echoed: it is known by its *key id*, the first 12
hex digits of its SHA-256 (``key-1a2b3c4d5e6f``), which also names its rate-limit bucket.

Example:
    >>> keys = ApiKeys(["s3cret-key-for-the-lab"])
    >>> keys.identify({"authorization": "Bearer s3cret-key-for-the-lab"})
    'key-a9289efadcb5'
    >>> keys.identify({"x-api-key": "guess"}) is None
    True
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from mathsearch.core.errors import ConfigurationError
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)

__all__ = ["MIN_KEY_CHARS", "ApiKeys", "key_id", "parse_keys"]

#: Shorter keys are refused at start-up (they could be guessed).
MIN_KEY_CHARS = 16


def key_id(key: str) -> str:
    """The name a key is logged and rate-limited under: ``key-`` + 12 hex digits of SHA-256."""
    return "key-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def parse_keys(text: str, source: str = "keys file") -> list[str]:
    """The keys of a keys file: one a line, blank lines and ``#`` comments skipped.

    Raises:
        ConfigurationError: a key shorter than :data:`MIN_KEY_CHARS` or holding whitespace
            (the line number says which; the key itself is not shown).
    """
    keys: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if len(key) < MIN_KEY_CHARS or any(c.isspace() for c in key):
            raise ConfigurationError(
                f"{source} line {number}: a key needs {MIN_KEY_CHARS}+ characters, no spaces"
            )
        keys.append(key)
    return keys


class ApiKeys:
    """The accepted keys (none: auth off)."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        unique = list(dict.fromkeys(keys))
        self._keys = [(k.encode("utf-8"), key_id(k)) for k in unique]

    @classmethod
    def from_settings(cls, settings: OpenSearchSettings) -> ApiKeys:
        """The keys of ``MATHSEARCH_SERVE_API_KEYS_FILE`` and ``MATHSEARCH_SERVE_API_KEY``.

        Raises:
            ConfigurationError: the file cannot be read, holds no key, or a key is too short.
        """
        keys: list[str] = []
        path = settings.serve_api_keys_file
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigurationError(
                    f"MATHSEARCH_SERVE_API_KEYS_FILE: cannot read {path}: {exc}"
                ) from exc
            keys = parse_keys(text, f"MATHSEARCH_SERVE_API_KEYS_FILE {path}")
            if not keys:
                raise ConfigurationError(f"MATHSEARCH_SERVE_API_KEYS_FILE {path} holds no key")
        if settings.serve_api_key:
            keys += parse_keys(settings.serve_api_key, "MATHSEARCH_SERVE_API_KEY")
        found = cls(keys)
        if found.enabled:
            logger.info("API keys on: %d key(s), ids %s", len(found), ", ".join(found.ids))
        return found

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    @property
    def ids(self) -> list[str]:
        return [name for _, name in self._keys]

    def __len__(self) -> int:
        return len(self._keys)

    def identify(self, headers: Mapping[str, str]) -> str | None:
        """The key id of the request's key (``headers`` with lower-case names), or ``None``
        when it names none or an unknown one."""
        presented = presented_key(headers)
        if presented is None:
            return None
        candidate = presented.encode("utf-8", "surrogateescape")
        found: str | None = None
        for key, name in self._keys:  # every key compared: the time does not tell which matched
            if hmac.compare_digest(candidate, key) and found is None:
                found = name
        return found


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents (``Authorization: Bearer KEY`` first, then ``X-API-Key``)."""
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None
