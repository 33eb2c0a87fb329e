"""The parse stage: an equation record -> MathML tree, graph, BoW, math tokens, symbols.

This is the one featurisation (docs/architecture.md, rule 2) that training (encoders/), indexing
(workers/) and querying call::

    featuriser = Featuriser()                       # default vocabulary, MATHSEARCH_CONVERTER
    for item in featuriser.parse_batch(records):    # ParsedEquation or Failure, in order
        ...

A record with ``mathml`` is read as MathML; otherwise its ``latex`` is converted. Every failure
becomes a :class:`~mathsearch.indexer.records.Failure` with its stage (``convert``, ``graph``,
``tokens``, ``prefix``) and reason; nothing raises out of :meth:`Featuriser.parse_batch`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mathsearch.indexer.closing import Closing
from mathsearch.indexer.converters import (
    Converted,
    KatexBatchConverter,
    PythonConverter,
    make_converter,
)
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.lexical import bow_vector, math_tokens, symbols
from mathsearch.indexer.mathml_graph import EquationGraph, build_graph
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.mathml_tree import MathNode, to_mathml
from mathsearch.indexer.records import EquationRecord, Failure, excerpt
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

logger = logging.getLogger(__name__)


@dataclass
class ParsedEquation:
    """A featurised equation: the record plus everything the encoders and OpenSearch need."""

    record: EquationRecord
    tree: MathNode
    graph: EquationGraph
    bow: np.ndarray
    math_tokens: list[str]
    symbols: dict[str, list[str]]
    unknown_macros: list[str] = field(default_factory=list)
    prefix: list[str] | None = None
    prefix_error: str | None = None
    canonical: list[str] = field(default_factory=list)
    canonical_error: str | None = None

    @property
    def eq_id(self) -> str:
        return self.record.eq_id

    @property
    def mathml(self) -> str:
        return to_mathml(self.tree)

    @property
    def input_format(self) -> str:
        """``"mathml"`` when the tree was read from the record's MathML, else ``"latex"``
        (the MathML is then the converter's rendering, which the index need not keep)."""
        return "mathml" if self.record.mathml else "latex"

    def embed_item(self) -> dict[str, Any]:
        """What an encoder of any family reads (:class:`mathsearch.runtime.embedders.Embedder`):
        ``latex``, ``graph`` (the :class:`EquationGraph` itself, not its JSON), ``math_tokens``
        and the prefix when there is one. The in-process form of :meth:`to_dict`'s fields."""
        item: dict[str, Any] = {
            "latex": self.record.latex,
            "graph": self.graph,
            "math_tokens": self.math_tokens,
        }
        if self.prefix is not None:
            item["prefix"] = self.prefix
        if self.prefix_error is not None:
            item["prefix_error"] = self.prefix_error
        return item

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written to ``parsed.jsonl`` (BoW as sparse ``[[slot, count], ...]``)."""
        data = self.record.to_dict()
        data["mathml"] = self.mathml
        data["input_format"] = self.input_format
        data["graph"] = self.graph.to_dict()
        nonzero = np.flatnonzero(self.bow)
        data["bow"] = [[int(i), int(self.bow[i])] for i in nonzero]
        data["math_tokens"] = self.math_tokens
        data["symbols"] = self.symbols
        if self.unknown_macros:
            data["unknown_macros"] = sorted(set(self.unknown_macros))
        if self.prefix is not None:
            data["prefix"] = self.prefix
        if self.prefix_error is not None:
            data["prefix_error"] = self.prefix_error
        if self.canonical:
            data["canonical"] = self.canonical
        if self.canonical_error is not None:
            data["canonical_error"] = self.canonical_error
        return data


@dataclass
class StageTimes:
    """Seconds spent per stage, summed over the equations parsed (for reports and bench)."""

    convert: float = 0.0
    graph: float = 0.0
    tokens: float = 0.0
    prefix: float = 0.0
    canonical: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {
            "convert": self.convert,
            "graph": self.graph,
            "tokens": self.tokens,
            "prefix": self.prefix,
            "canonical": self.canonical,
        }


def _failure(record: EquationRecord, stage: str, exc: BaseException) -> Failure:
    reason = exc.reason if isinstance(exc, IndexerError) else type(exc).__name__
    return Failure(
        eq_id=record.eq_id,
        doc_id=record.doc_id,
        stage=stage,
        reason=reason,
        detail=str(exc)[:500],
        source=record.source,
        excerpt=excerpt(record.latex or record.mathml),
    )


class Featuriser(Closing):
    """Converter + vocabulary + limits; parses records one batch at a time.

    Args:
        vocabulary: the node vocabulary (default: the shipped ``vocabulary-v1.json``).
        converter: ``"python"`` or ``"katex"`` (default ``settings.converter``) or an object
            with ``convert_batch``.
        settings: limits; :meth:`IndexerSettings.from_env` when None.
        with_prefix: also compute SymPy prefix tokens (``prefix`` stage, slow, optional).
        strict: unknown macros are conversion failures (python converter).
    """

    def __init__(
        self,
        vocabulary: Vocabulary | None = None,
        converter: str | PythonConverter | KatexBatchConverter | None = None,
        settings: IndexerSettings | None = None,
        *,
        with_prefix: bool = False,
        strict: bool = False,
    ) -> None:
        self.settings = settings or IndexerSettings.from_env()
        self.vocabulary = vocabulary or default_vocabulary()
        if converter is None or isinstance(converter, str):
            converter = make_converter(converter, self.settings, strict=strict)
        self.converter = converter
        self.with_prefix = with_prefix
        self.times = StageTimes()

    def close(self) -> None:
        self.converter.close()

    def parse_latex(self, latex: str, eq_id: str = "query") -> ParsedEquation | Failure:
        """Featurise one LaTeX string (a query): the same path as indexing."""
        record = EquationRecord(eq_id=eq_id, doc_id="", position=0, latex=latex)
        return self.parse_batch([record])[0]

    def parse_batch(self, records: Sequence[EquationRecord]) -> list[ParsedEquation | Failure]:
        """Featurise a batch; one ParsedEquation or Failure per record, in order."""
        clock = time.perf_counter
        start = clock()
        trees: list[Converted | IndexerError | None] = [None] * len(records)
        latex_at: list[int] = []
        for index, record in enumerate(records):
            if record.mathml:
                try:
                    trees[index] = Converted(parse_mathml(record.mathml, self.settings))
                except IndexerError as exc:
                    trees[index] = exc
            elif record.latex:
                latex_at.append(index)
            else:
                trees[index] = IndexerError("record has neither latex nor mathml", "empty")
        if latex_at:
            converted = self.converter.convert_batch([records[i].latex or "" for i in latex_at])
            for index, result in zip(latex_at, converted, strict=True):
                trees[index] = result
        self.times.convert += clock() - start
        return [self._featurise(record, tree) for record, tree in zip(records, trees, strict=True)]

    def _featurise(
        self, record: EquationRecord, converted: Converted | IndexerError | None
    ) -> ParsedEquation | Failure:
        if not isinstance(converted, Converted):
            exc = converted or IndexerError("no conversion result", "internal")
            return _failure(record, "convert", exc)
        clock = time.perf_counter
        start = clock()
        try:
            graph = build_graph(converted.tree, self.vocabulary, self.settings)
            bow = bow_vector(graph)
        except (IndexerError, RecursionError, ValueError) as exc:
            self.times.graph += clock() - start
            return _failure(record, "graph", exc)
        middle = clock()
        self.times.graph += middle - start
        try:
            tokens = math_tokens(converted.tree)
            found = symbols(converted.tree)
        except (IndexerError, RecursionError, ValueError) as exc:
            self.times.tokens += clock() - middle
            return _failure(record, "tokens", exc)
        self.times.tokens += clock() - middle
        parsed = ParsedEquation(
            record=record,
            tree=converted.tree,
            graph=graph,
            bow=bow,
            math_tokens=tokens,
            symbols=found,
            unknown_macros=converted.unknown_macros,
        )
        if self.with_prefix and record.latex:
            self._prefix(parsed, record.latex)
        if self.settings.canonical_form != "off" and record.latex:
            self._canonical(parsed, record.latex)
        return parsed

    def _canonical(self, parsed: ParsedEquation, latex: str) -> None:
        """``canon_tokens``, optional: a formula no normal form reads keeps its reason."""
        from mathsearch.indexer.canonical_form import CanonicalFormError, canonical_tokens

        start = time.perf_counter()
        try:
            parsed.canonical = canonical_tokens(
                latex, settings=self.settings, sympy=self.settings.canonical_form == "sympy"
            )
        except CanonicalFormError as exc:
            parsed.canonical_error = exc.reason
        finally:
            self.times.canonical += time.perf_counter() - start

    def _prefix(self, parsed: ParsedEquation, latex: str) -> None:
        """SymPy prefix tokens, optional: an expression SymPy cannot read keeps its reason."""
        from mathsearch.indexer.prefix import PrefixError, latex_to_prefix

        start = time.perf_counter()
        try:
            parsed.prefix = latex_to_prefix(latex, timeout=self.settings.sympy_timeout)
        except PrefixError as exc:
            parsed.prefix_error = exc.reason
        finally:
            self.times.prefix += time.perf_counter() - start

    def parse_stream(
        self, items: Iterable[EquationRecord | Failure], batch_size: int = 256
    ) -> Iterator[ParsedEquation | Failure]:
        """Featurise a stream in batches, in order; failures already in it pass through."""
        batch: list[EquationRecord] = []
        for item in items:
            if isinstance(item, Failure):
                if batch:
                    yield from self.parse_batch(batch)
                    batch = []
                yield item
                continue
            batch.append(item)
            if len(batch) >= batch_size:
                yield from self.parse_batch(batch)
                batch = []
        if batch:
            yield from self.parse_batch(batch)
