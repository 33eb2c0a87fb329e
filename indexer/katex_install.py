"""Installation of the pinned npm ``katex`` for :mod:`mathsearch.indexer.katex_backend`.

:func:`ensure_katex` copies ``indexer/resources/katex`` (:data:`RESOURCE_FILES`) into a staging
directory, runs ``npm ci`` there (the ``npm`` beside the configured node, else the first on
``PATH``) and moves the result into ``<katex_dir>/katex-<version>-<hash of package-lock.json>``
under a file lock. Missing node or npm, a failed ``npm ci`` or an unwritable cache directory
raise :class:`KatexUnavailable`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from mathsearch.core.env import cache_dir_from_env
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

#: Files of ``indexer/resources/katex`` copied into the install directory.
RESOURCE_FILES = ("package.json", "package-lock.json", "convert.js")
_INSTALL_TIMEOUT = 900.0


class KatexUnavailable(IndexerError):  # noqa: N818 - named like LimitExceeded
    """node or npm is missing, ``npm ci`` failed, or the converter process does not start."""

    reason = "katex-unavailable"


def _tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of a command's output (for error messages)."""
    return "\n".join(text.strip().splitlines()[-lines:])


def _resource_bytes() -> dict[str, bytes]:
    folder = resources.files("mathsearch.indexer").joinpath("resources/katex")
    return {name: folder.joinpath(name).read_bytes() for name in RESOURCE_FILES}


def _npm_for(node: str) -> str | None:
    """``npm`` next to the resolved node executable, else the first one on ``PATH``."""
    resolved = shutil.which(node)
    if resolved is not None:
        beside = Path(resolved).resolve().parent / "npm"
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which("npm")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX ``flock``, released on process exit)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_bytes(data)
    os.replace(scratch, path)


def ensure_katex(settings: IndexerSettings | None = None) -> Path:
    """Install the pinned katex (``npm ci``) once and return the directory with ``convert.js``.

    The install directory is ``<katex_dir>/katex-<version>-<hash of package-lock.json>``, so a
    version bump installs anew next to the old one. Concurrent callers (workers, test
    processes) serialise on a file lock; a finished install is marked by ``.installed`` and
    later calls only refresh ``convert.js``. Raises :class:`KatexUnavailable` when node or npm
    is missing or ``npm ci`` fails (the message has the command and the tail of its stderr).
    """
    settings = settings or IndexerSettings.from_env()
    base = Path(settings.katex_dir or cache_dir_from_env() / "katex").expanduser()
    files = _resource_bytes()
    lock = files["package-lock.json"]
    key = hashlib.sha256(lock).hexdigest()[:16]
    version = json.loads(lock)["packages"]["node_modules/katex"]["version"]
    target = base / f"katex-{version}-{key}"
    if shutil.which(settings.node) is None:
        raise KatexUnavailable(
            f"node executable {settings.node!r} not found (set MATHSEARCH_NODE or install "
            "Node.js >= 18 to use MATHSEARCH_CONVERTER=katex)"
        )
    try:
        with _file_lock(base / f".install-{key}.lock"):
            return _install(settings, files, base, target, key)
    except OSError as exc:  # an unwritable cache directory, a full disk, ...
        raise KatexUnavailable(f"cannot install katex into {target}: {exc}") from exc


def _install(
    settings: IndexerSettings, files: dict[str, bytes], base: Path, target: Path, key: str
) -> Path:
    """The body of :func:`ensure_katex`, run under the install lock."""
    if (target / ".installed").is_file() and (
        target / "node_modules" / "katex" / "package.json"
    ).is_file():
        _write_if_changed(target / "convert.js", files["convert.js"])
        return target
    npm = _npm_for(settings.node)
    if npm is None:
        raise KatexUnavailable(
            "npm not found next to node or on PATH; it is needed once to install katex "
            f"into {target}"
        )
    for stale in base.glob(f".staging-{key}-*"):  # left by an install that was killed
        shutil.rmtree(stale, ignore_errors=True)
    staging = base / f".staging-{key}-{os.getpid()}"
    staging.mkdir(parents=True)
    for name, data in files.items():
        (staging / name).write_bytes(data)
    command = [npm, "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"]
    logger.info("installing katex into %s: %s", target, " ".join(command))
    try:
        done = subprocess.run(
            command,
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise KatexUnavailable(f"`{' '.join(command)}` in {staging} failed: {exc}") from exc
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise KatexUnavailable(
            f"`{' '.join(command)}` in {staging} exited with {done.returncode}:\n"
            f"{_tail(done.stderr or done.stdout)}"
        )
    (staging / ".installed").write_text(key + "\n", "utf-8")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    logger.info("katex installed in %s", target)
    return target
