"""Query featurisation for search: the same math tokens and model vectors as indexing.

:class:`ModelQueryEncoder` runs :class:`mathsearch.indexer.parse.Featuriser` once per query and then
every requested encoder on that one featurisation (docs/architecture.md, rule 2: one featurisation):
the ONNX :class:`mathsearch.runtime.gcn_session.GcnSession` of the graph CNN by default, or any
families /
``.onnx`` models through :func:`mathsearch.runtime.embedders.load_embedder` (each loaded once, on
first use). Anything with a ``features(latex) -> QueryFeatures`` method can stand in (e.g. a cache
in benchmarks). A search in a mode without vectors (``bm25``) asks for the tokens alone
(``embed=False``) when the encoder takes that keyword, so it runs no model.

Example::

    encoder = ModelQueryEncoder(encoders=["gcn", "bitmap"])
    features = encoder.features(r"\\frac{a}{b}")
    features.vectors            # {"vec_gcn_v1": [...], "vec_bitmap_v1": [...]}
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol

from mathsearch.core.errors import QueryError

logger = logging.getLogger(__name__)


class QueryFeatures(NamedTuple):
    """A query featurised: its math tokens, its (first) vector and the field that vector belongs
    to; ``vectors`` holds every encoder's vector by field, ``refusals`` why an encoder gave none
    (``None`` from encoders that fill one field: then ``{vector_field: vector}``)."""

    tokens: list[str]
    vector: list[float] | None
    vector_field: str | None
    vectors: dict[str, list[float]] | None = None
    refusals: dict[str, str] | None = None
    #: the second stage's vectors still being embedded: one future of ``(vectors, refusals)``
    #: per encoder (they embed side by side)
    pending: tuple[Future[tuple[dict[str, list[float]], dict[str, str]]], ...] = ()

    def resolved(self) -> QueryFeatures:
        """These features with the deferred vectors in ``vectors`` (waits for them)."""
        if not self.pending:
            return self
        vectors, refusals = self.by_field(), dict(self.refusals or {})
        for future in self.pending:
            found, refused = future.result()
            vectors.update(found)
            refusals.update(refused)
        return self._replace(vectors=vectors, refusals=refusals, pending=())

    def by_field(self) -> dict[str, list[float]]:
        """Every vector of the query by field."""
        if self.vectors is not None:
            return dict(self.vectors)
        if self.vector is not None and self.vector_field:
            return {self.vector_field: self.vector}
        return {}


#: Threads that embed deferred second-stage query vectors (one per concurrent request; a
#: serving process rarely runs more than two searches at once on a 2-core node).
DEFERRED_THREADS = 2


def _embed_all(
    embedders: Sequence[Any], item: Any
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Each embedder's vector of one featurised query, and why an embedder refused it."""
    from mathsearch.runtime.embedder_base import EmbedRefusal, embed_safely, written_vector

    vectors: dict[str, list[float]] = {}
    refusals: dict[str, str] = {}
    for embedder in embedders:
        (result,) = embed_safely(embedder, [item])  # a model fault: no vector for its field
        if isinstance(result, EmbedRefusal):
            refusals[embedder.vector_field] = f"{result.reason} {result.detail}".strip()
        else:
            vectors[embedder.vector_field] = written_vector(result)
    return vectors, refusals


def takes_keyword(encoder: Any, keyword: str) -> bool:
    """Whether ``encoder.features`` takes ``keyword``: ``encoders=`` (names per query) or
    ``embed=`` (``False``: the tokens alone, for a mode without vectors)."""
    try:
        return keyword in inspect.signature(encoder.features).parameters
    except (TypeError, ValueError):
        return False


def _query_tokens(parsed: Any) -> list[str]:
    """What BM25 searches with: the math tokens and the canonical-form tokens."""
    return list(parsed.math_tokens) + list(parsed.canonical)


class QueryEncoder(Protocol):
    """Turns query LaTeX into :class:`QueryFeatures` (raises :class:`QueryError` if it can't)."""

    def features(self, latex: str) -> QueryFeatures: ...


def encoder_field(name: str) -> str:
    """The vector field of encoder ``name`` (a family: its default model, or an ``.onnx`` path),
    from its card.

    Raises:
        QueryError: an unknown family, or a model or card that is not there.
    """
    from mathsearch.runtime.embedders import encoder_card
    from mathsearch.runtime.errors import ModelCardError

    try:
        return encoder_card(name, verify_sha256=False).vector_field
    except ModelCardError as exc:
        raise QueryError(str(exc)) from exc


class ModelQueryEncoder:
    """Featuriser + encoders, created on first use.

    Args:
        model: the encoder used when none are named: an ONNX path (default
            ``MATHSEARCH_MODEL``, the graph CNN), a ready
            :class:`~mathsearch.runtime.embedders.Embedder` or
            :class:`mathsearch.runtime.gcn_session.GcnSession`.
        encoders: encoders every query is embedded with by default: families, ``.onnx`` paths
            or ready :class:`~mathsearch.runtime.embedders.Embedder` s (``features(latex,
            encoders=...)``
            names others per query).
    """

    def __init__(self, model: Any = None, *, encoders: Sequence[Any] | None = None) -> None:
        self._model = model
        self._names = list(encoders or [])
        self._featurisers: dict[bool, Any] = {}
        self._embedders: dict[str, Any] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def features(
        self,
        latex: str,
        encoders: Sequence[Any] | None = None,
        *,
        embed: bool = True,
        extra: Sequence[Any] = (),
        defer_extra: bool = False,
        on_tokens: Callable[[list[str]], None] | None = None,
    ) -> QueryFeatures:
        """Featurise ``latex`` once; embed it with ``encoders`` (default: this encoder's).

        ``extra`` encoders (a second stage's) embed the same featurisation too: their vectors
        join ``vectors`` by field (``vector`` stays the first encoder's); with
        ``defer_extra`` they are embedded on background threads instead, one per encoder, side
        by side once the first stage's vectors are done, and :meth:`QueryFeatures.resolved`
        waits for them (the searcher asks after its first stage). ``embed=False`` (a mode
        with no vector side, such as ``bm25``): the tokens alone, with no vector, no refusals
        and no model loaded. ``on_tokens`` gets the query's tokens as soon as they are known,
        before any embedding (the searcher starts choosing BM25's tokens meanwhile).
        """
        if not embed:
            tokens = _query_tokens(self._parse(latex))
            return QueryFeatures(tokens=tokens, vector=None, vector_field=None, vectors={})
        names = list(encoders or self._names)
        default = self._model if self._model is not None else "gcn"  # MATHSEARCH_MODEL's
        primary = self._distinct([(name, self._embedder(name)) for name in names or [default]])
        named = [(name, self._embedder(name)) for name in [*(names or [default]), *extra]]
        embedders = self._distinct(named)
        from mathsearch.runtime.families import needs_prefix

        with_prefix = needs_prefix([embedder.family for embedder in embedders])
        parsed = self._parse(latex, with_prefix)
        if on_tokens is not None:
            on_tokens(_query_tokens(parsed))
        item = parsed.embed_item()
        later = embedders[len(primary) :]  # the second stage's (the first stage's come first)
        deferred = bool(later and defer_extra)
        if deferred:
            embedders = embedders[: len(primary)]
        vectors, refusals = _embed_all(embedders, item)  # the first stage's, on their own
        pending: tuple[Future[tuple[dict[str, list[float]], dict[str, str]]], ...] = ()
        if deferred:  # then side by side while the first stage runs on the cluster
            pool = self._pool()
            pending = tuple(pool.submit(_embed_all, [embedder], item) for embedder in later)
        first = embedders[0].vector_field
        return QueryFeatures(
            tokens=_query_tokens(parsed),
            vector=vectors.get(first),
            vector_field=first,
            vectors=vectors,
            refusals=refusals,
            pending=pending,
        )

    def _pool(self) -> ThreadPoolExecutor:
        """The threads that embed deferred second-stage vectors (ONNX Runtime releases the
        GIL, so they run while the request thread waits on the cluster)."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=DEFERRED_THREADS, thread_name_prefix="query-extra"
                )
            return self._executor

    @staticmethod
    def _distinct(named: list[tuple[Any, Any]]) -> list[Any]:
        """The embedders of ``named`` with one per vector field (a model named twice is
        embedded once).

        Raises:
            QueryError: two different models that write the same field (their vectors would
                overwrite each other's).
        """
        from mathsearch.runtime.embedders import one_field_each
        from mathsearch.runtime.errors import ModelCardError

        try:
            fields = one_field_each([(str(name), embedder.card) for name, embedder in named])
        except ModelCardError as exc:
            raise QueryError(str(exc)) from exc
        # the fields in order of their first encoder, and that encoder
        return [next(e for _, e in named if e.vector_field == field) for field in fields]

    def _parse(self, latex: str, with_prefix: bool = False) -> Any:
        from mathsearch.indexer.parse import Featuriser
        from mathsearch.indexer.records import Failure

        if with_prefix not in self._featurisers:
            self._featurisers[with_prefix] = Featuriser(with_prefix=with_prefix)
        parsed = self._featurisers[with_prefix].parse_latex(latex)
        if isinstance(parsed, Failure):
            raise QueryError(f"cannot read the query ({parsed.reason}): {parsed.detail}")
        return parsed

    def _embedder(self, name: Any) -> Any:
        """The embedder of a family or an ``.onnx`` path (loaded once), of a loaded ``GcnSession``
        (wrapped) or a ready :class:`~mathsearch.runtime.embedders.Embedder` (itself):
        ``as_embedder``."""
        if isinstance(name, str) and name in self._embedders:
            return self._embedders[name]
        from mathsearch.runtime.embedders import as_embedder
        from mathsearch.runtime.settings import RuntimeSettings

        try:  # one equation a call: MATHSEARCH_QUERY_THREADS (1), no thread spinning idle
            embedder = as_embedder(name, threads=RuntimeSettings.from_env().query_threads)
        except ValueError as exc:  # no model or card, or a mismatch
            raise QueryError(f"encoder {name!r}: {exc}") from exc
        if isinstance(name, str):
            self._embedders[name] = embedder
            logger.info("query encoder %s ready", embedder.vector_field)
        return embedder
