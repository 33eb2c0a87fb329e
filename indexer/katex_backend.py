"""The KaTeX LaTeX -> MathML backend: the pinned npm ``katex`` under one long-running node.

This is the converter the KDD 2020 seed used. :func:`ensure_katex` installs the package pinned in
``indexer/resources/katex/package-lock.json`` with ``npm ci`` into a cache directory
(``MATHSEARCH_KATEX_DIR``); :class:`KatexConverter` runs ``convert.js`` there and converts
batches::

    with KatexConverter() as katex:
        results = katex.convert_batch([r"\\frac{a}{b}", r"\\foo"])
    # ['<math ...>...</math>', KatexError('... Undefined control sequence: \\foo ...')]

Each input gives the ``<math>`` element (``<semantics>`` with the TeX annotation inside) or an
error object with a stable ``reason`` (DESIGN.md rule 3, errors are data): a :class:`KatexError`
(a :class:`~indexer.errors.ConversionError`) with ``unknown-macro``, ``unknown-environment``,
``unbalanced-braces``, ``unbalanced-delimiters``, ``katex-parse-error``,
``katex-internal-error``, ``katex-timeout``, ``katex-crashed`` or ``bad-input``, or a
:class:`~indexer.errors.LimitExceeded` with ``too-large``, ``too-deep`` or
``too-many-expansions``. A node that hangs or dies is restarted and the batch goes on; only a
node that cannot start at all raises :class:`KatexUnavailable`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from indexer.errors import ConversionError, IndexerError, LimitExceeded
from indexer.settings import IndexerSettings, _default_cache_dir

logger = logging.getLogger(__name__)

#: Files of ``indexer/resources/katex`` copied into the install directory.
RESOURCE_FILES = ("package.json", "package-lock.json", "convert.js")
#: Reason codes that come back as :class:`LimitExceeded` rather than :class:`KatexError`.
LIMIT_REASONS = frozenset({"too-large", "too-deep", "too-many-expansions"})
_STDERR_LINES = 40
_INSTALL_TIMEOUT = 900.0
_FAILURES = {
    "katex-timeout": "KaTeX did not answer within the item timeout; node was restarted",
    "katex-crashed": "node exited while converting this equation; it was restarted",
}

#: What :meth:`KatexConverter.convert_batch` gives for one input.
KatexResult = str | ConversionError | LimitExceeded


class KatexUnavailable(IndexerError):  # noqa: N818 - named like LimitExceeded
    """node or npm is missing, ``npm ci`` failed, or the converter process does not start."""

    reason = "katex-unavailable"


class KatexError(ConversionError):
    """KaTeX rejected one equation; ``name`` is the unknown macro or environment, if any."""

    def __init__(self, message: str, reason: str | None = None, name: str | None = None) -> None:
        super().__init__(message, reason)
        self.name = name


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _resource_bytes() -> dict[str, bytes]:
    folder = resources.files("indexer").joinpath("resources/katex")
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
    base = Path(settings.katex_dir or _default_cache_dir() / "katex").expanduser()
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


def _normalise_macros(macros: Mapping[str, str] | None) -> dict[str, str] | None:
    """``{"RR": ...}`` and ``{"\\\\RR": ...}`` both name ``\\RR``; non-string values are errors."""
    if not macros:
        return None
    normal: dict[str, str] = {}
    for name, body in macros.items():
        if not isinstance(name, str) or not isinstance(body, str):
            raise TypeError(f"macro {name!r}: names and bodies must be strings")
        normal[name if name.startswith("\\") else "\\" + name] = body
    return normal


def _error(reason: str, message: str, name: str | None = None) -> ConversionError | LimitExceeded:
    if reason in LIMIT_REASONS:
        return LimitExceeded(message, reason)
    return KatexError(message, reason, name)


class _Node:
    """One node process running ``convert.js``, with threads draining stdout and stderr."""

    def __init__(self, node: str, directory: Path, start_timeout: float) -> None:
        self.stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self.answers: queue.Queue[bytes | None] = queue.Queue()
        try:
            self.process = subprocess.Popen(
                [node, str(directory / "convert.js")],
                cwd=directory,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise KatexUnavailable(f"cannot start {node} in {directory}: {exc}") from exc
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._drain, args=(self.process.stdout,), daemon=True).start()
        self._stderr_thread = threading.Thread(
            target=self._log, args=(self.process.stderr,), daemon=True
        )
        self._stderr_thread.start()
        try:
            header = self.answers.get(timeout=start_timeout)
        except queue.Empty:
            header = None
        try:
            self.version = str(json.loads(header or b"{}")["katex"])
        except (ValueError, KeyError, TypeError):
            self.kill()
            self._stderr_thread.join(timeout=2)
            raise KatexUnavailable(
                f"{node} {directory / 'convert.js'} did not start: "
                f"{_tail(''.join(self.stderr)) or header!r}"
            ) from None

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.answers.put(line)
        self.answers.put(None)

    def _log(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            self.stderr.append(line)
            logger.debug("katex node: %s", line.rstrip())

    @property
    def exit_code(self) -> int | None:
        return self.process.returncode

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, payload: bytes) -> None:
        """Write one batch from a thread, so a node that stops reading cannot block us."""

        def write() -> None:
            stdin = self.process.stdin
            try:
                assert stdin is not None
                stdin.write(payload)
                stdin.flush()
            except (OSError, ValueError):
                pass  # the process died; the reader sees EOF

        threading.Thread(target=write, daemon=True).start()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def close(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


class KatexConverter:
    """LaTeX -> MathML through one node process running KaTeX, batch by batch.

    ``timeout`` bounds one batch (seconds; keep batches to hundreds or a few thousand
    equations). When it passes, or node dies, node is restarted; the item node was working
    on (the first unanswered one: node answers in order, each answer as soon as it is ready)
    is retried alone under ``item_timeout`` and fails (``katex-timeout`` / ``katex-crashed``)
    only if it hangs or kills node again; the rest of the batch is sent anew. Calls from
    several threads are serialised by a lock.
    """

    def __init__(
        self,
        settings: IndexerSettings | None = None,
        *,
        timeout: float = 60.0,
        item_timeout: float = 10.0,
        start_timeout: float = 30.0,
    ) -> None:
        self.settings = settings or IndexerSettings.from_env()
        self.timeout = timeout
        self.item_timeout = item_timeout
        self.start_timeout = start_timeout
        self.restarts = 0
        self._directory: Path | None = None
        self._node: _Node | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    def __enter__(self) -> KatexConverter:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def version(self) -> str:
        """The katex version of the running process (starts it if needed)."""
        return self._process().version

    @property
    def pid(self) -> int | None:
        """The node process id, or None when none is running."""
        return self._node.process.pid if self._node is not None else None

    def start(self) -> None:
        """Install katex if needed and start node (done lazily by the first batch otherwise)."""
        self._process()

    def _process(self) -> _Node:
        if self._node is not None and self._node.alive():
            return self._node
        if self._node is not None:
            self._node.kill()
            logger.warning("katex node %d ended (%s); restarting", self.pid, self._node.exit_code)
            self.restarts += 1
        if self._directory is None:
            self._directory = ensure_katex(self.settings)
        self._node = _Node(self.settings.node, self._directory, self.start_timeout)
        return self._node

    def close(self) -> None:
        """Stop node (stdin EOF, then kill after 5 s). The converter can start again later."""
        with self._lock:
            if self._node is not None:
                self._node.close()
                self._node = None

    def convert(self, latex: str, macros: Mapping[str, str] | None = None) -> str:
        """One equation: its ``<math>`` element, or raise its :class:`ConversionError`."""
        result = self.convert_batch([latex], macros)[0]
        if isinstance(result, str):
            return result
        raise result

    def convert_batch(
        self, latexes: Sequence[str], macros: Mapping[str, str] | None = None
    ) -> list[KatexResult]:
        """Convert a batch: for each input, in order, its ``<math>`` element or its error.

        Inputs longer than ``settings.max_equation_chars`` become :class:`LimitExceeded`
        without reaching node. ``macros`` (``{"\\\\RR": "\\\\mathbb{R}"}``, ``#1`` for
        arguments) apply to every input of the batch.
        """
        limit = self.settings.max_equation_chars
        results: list[KatexResult | None] = [None] * len(latexes)
        todo: list[int] = []
        for index, latex in enumerate(latexes):
            if not isinstance(latex, str):
                results[index] = KatexError(f"not a string: {type(latex).__name__}", "bad-input")
            elif len(latex) > limit:
                results[index] = LimitExceeded(
                    f"{len(latex)} characters of LaTeX, more than the limit of {limit} "
                    "(MATHSEARCH_MAX_EQUATION_CHARS)"
                )
            else:
                todo.append(index)
        normal = _normalise_macros(macros)
        with self._lock:
            pending = todo
            while pending:
                left, failure = self._exchange(pending, latexes, normal, results, self.timeout)
                if not left:
                    break
                # node answers in order, one write per answer: it was working on left[0].
                suspect, pending = left[0], left[1:]
                logger.warning(
                    "katex: %s on item %d of the batch (%d unanswered); retrying it alone",
                    failure,
                    suspect,
                    len(left),
                )
                again, failure = self._exchange(
                    [suspect], latexes, normal, results, self.item_timeout
                )
                if again:
                    results[suspect] = KatexError(_FAILURES[failure], failure)
        return [
            result if result is not None else KatexError("no answer", "katex-crashed")
            for result in results
        ]

    def _exchange(
        self,
        indices: list[int],
        latexes: Sequence[str],
        macros: dict[str, str] | None,
        results: list[KatexResult | None],
        timeout: float,
    ) -> tuple[list[int], str]:
        """Send ``indices`` as one batch and fill ``results``; return the unanswered ones."""
        if not indices:
            return [], ""
        node = self._process()
        by_id: dict[int, int] = {}
        lines: list[str] = []
        for index in indices:
            request_id = self._next_id
            self._next_id += 1
            by_id[request_id] = index
            request: dict[str, Any] = {"id": request_id, "latex": latexes[index]}
            if macros:
                request["macros"] = macros
            lines.append(json.dumps(request, ensure_ascii=True))
        node.send(("\n".join(lines) + "\n").encode("ascii"))
        deadline = time.monotonic() + timeout
        while by_id:
            try:
                raw = node.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                node.kill()
                return sorted(by_id.values()), "katex-timeout"
            if raw is None:
                node.kill()
                return sorted(by_id.values()), "katex-crashed"
            try:
                answer = json.loads(raw)
                index = by_id.pop(answer["id"])
            except (ValueError, KeyError, TypeError):
                logger.warning("katex: ignoring unexpected output %r", raw[:200])
                continue
            if "mathml" in answer:
                results[index] = str(answer["mathml"])
            else:
                results[index] = _error(
                    str(answer.get("reason") or "katex-parse-error"),
                    str(answer.get("error") or "KaTeX error"),
                    answer.get("name"),
                )
        return [], ""
