"""The KaTeX LaTeX -> MathML backend: the pinned npm ``katex`` under one long-running node.

This is the converter the KDD 2020 seed used. :func:`ensure_katex` installs the package pinned in
``indexer/resources/katex/package-lock.json`` with ``npm ci`` into a cache directory
(``MATHSEARCH_KATEX_DIR``); :class:`KatexConverter` runs ``convert.js`` there and converts
batches::

    with KatexConverter() as katex:
        results = katex.convert_batch([r"\\frac{a}{b}", r"\\foo"])
    # ['<math ...>...</math>', KatexError('... Undefined control sequence: \\foo ...')]

Each input gives the ``<math>`` element (``<semantics>`` with the TeX annotation inside) or an error
object with a stable ``reason`` (docs/architecture.md, rule 3, errors are data): a
:class:`KatexError` (a :class:`~mathsearch.indexer.errors.ConversionError`) with ``unknown-macro``,
``unknown-environment``, ``unbalanced-braces``, ``unbalanced-delimiters``, ``katex-parse-error``,
``katex-internal-error``, ``katex-timeout``, ``katex-crashed`` or ``bad-input``, or a
:class:`~mathsearch.indexer.errors.LimitExceeded` with ``too-large``, ``too-deep`` or
``too-many-expansions``. A node that hangs or dies is restarted and the batch goes on; only a node
that cannot start at all raises :class:`KatexUnavailable`. The install lives in
:mod:`mathsearch.indexer.katex_install`, the node process wrapper in
:mod:`mathsearch.indexer.katex_process`; :func:`ensure_katex`, :class:`KatexUnavailable` and
:data:`RESOURCE_FILES` are re-exported here.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from mathsearch.indexer.closing import Closing
from mathsearch.indexer.errors import ConversionError, LimitExceeded
from mathsearch.indexer.katex_install import RESOURCE_FILES, KatexUnavailable, ensure_katex
from mathsearch.indexer.katex_process import NodeProcess as _Node
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

__all__ = [
    "LIMIT_REASONS",
    "RESOURCE_FILES",
    "KatexConverter",
    "KatexError",
    "KatexResult",
    "KatexUnavailable",
    "ensure_katex",
]

#: Reason codes that come back as :class:`LimitExceeded` rather than :class:`KatexError`.
LIMIT_REASONS = frozenset({"too-large", "too-deep", "too-many-expansions"})
_FAILURES = {
    "katex-timeout": "KaTeX did not answer within the item timeout; node was restarted",
    "katex-crashed": "node exited while converting this equation; it was restarted",
}

#: What :meth:`KatexConverter.convert_batch` gives for one input.
KatexResult = str | ConversionError | LimitExceeded


class KatexError(ConversionError):
    """KaTeX rejected one equation; ``name`` is the unknown macro or environment, if any."""

    def __init__(self, message: str, reason: str | None = None, name: str | None = None) -> None:
        super().__init__(message, reason)
        self.name = name


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


class KatexConverter(Closing):
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

    def __enter__(self) -> Self:
        self.start()
        return self

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
