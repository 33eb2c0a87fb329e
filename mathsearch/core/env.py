"""Environment settings helpers shared by every package's settings object, and the cache and
state folders.

``MATHSEARCH_CACHE_DIR`` (downloads, the assembled OpenSearch, the virtualenvs) defaults to
``/var/cache/mathsearch`` as root and ``$XDG_CACHE_HOME/mathsearch`` otherwise;
``MATHSEARCH_STATE_DIR``'s default (the local stack's data) to ``/var/lib/mathsearch`` /
``$XDG_STATE_HOME/mathsearch``. A malformed value raises :class:`ConfigurationError`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mathsearch.core.errors import ConfigurationError

__all__ = [
    "cache_dir_from_env",
    "default_cache_dir",
    "default_state_dir",
    "env_bool",
    "env_float",
    "env_int",
]


def env_bool(name: str, default: bool) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` from ``name``; ``default`` when unset or empty."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ConfigurationError(f"{name}={raw!r} is not a boolean (use 1 or 0)")


def env_float(name: str, default: float, *, error: type[Exception] = ConfigurationError) -> float:
    """A number from ``name``; ``default`` when unset or empty; ``error`` when malformed."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise error(f"{name}={raw!r} is not a number") from exc


def env_int(
    name: str, default: int, minimum: int = 0, *, error: type[Exception] = ConfigurationError
) -> int:
    """An integer >= ``minimum`` from ``name``; ``default`` when unset or empty; ``error`` (a
    package's settings error) when malformed or too small."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise error(f"{name}={raw!r} is not an integer") from exc
    if value < minimum:
        raise error(f"{name}={raw!r} must be at least {minimum}")
    return value


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def default_cache_dir() -> Path:
    """Folder for downloads, the assembled OpenSearch and the cached virtualenv."""
    if _is_root():
        return Path("/var/cache/mathsearch")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mathsearch"


def cache_dir_from_env() -> Path:
    """``MATHSEARCH_CACHE_DIR`` when set, else :func:`default_cache_dir`."""
    configured = os.environ.get("MATHSEARCH_CACHE_DIR")
    return Path(configured) if configured else default_cache_dir()


def default_state_dir() -> Path:
    """Folder for the local stack's node data, logs and pid files."""
    if _is_root():
        return Path("/var/lib/mathsearch")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mathsearch"
