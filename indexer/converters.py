"""LaTeX -> MathML backends behind one batch interface.

``python`` (default) is :func:`mathsearch.indexer.latex_to_mathml.latex_to_mathml`, in process.
``katex`` runs the npm katex package the KDD 2020 seed used under one node process
(:mod:`mathsearch.indexer.katex_backend`) and reads its MathML back with
:func:`mathsearch.indexer.mathml_reader.parse_mathml`. Both give :class:`Converted` items or typed
errors,
never raise for one bad equation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mathsearch.indexer.closing import Closing
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.latex_to_mathml import latex_to_mathml
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import CONVERTERS, IndexerSettings, SettingsError

logger = logging.getLogger(__name__)


@dataclass
class Converted:
    """One converted equation: the MathML tree, and the unknown macros kept as identifiers."""

    tree: MathNode
    unknown_macros: list[str] = field(default_factory=list)


ConvertResult = Converted | IndexerError


class Converter(Protocol):
    """Converts batches of LaTeX strings, one result (or typed error) per input, in order."""

    name: str

    def convert_batch(self, latexes: Sequence[str]) -> list[ConvertResult]: ...

    def close(self) -> None: ...


class PythonConverter(Closing):
    """The pure-Python converter (``strict``: unknown macros are errors, as in KaTeX)."""

    name = "python"

    def __init__(self, settings: IndexerSettings | None = None, strict: bool = False) -> None:
        self.settings = settings or IndexerSettings.from_env()
        self.strict = strict

    def convert(self, latex: str) -> ConvertResult:
        try:
            result = latex_to_mathml(latex, self.settings, strict=self.strict)
        except IndexerError as exc:
            return exc
        except RecursionError:
            return IndexerError("nesting too deep for the parser", reason="too-deep")
        return Converted(result.tree, result.unknown_macros)

    def convert_batch(self, latexes: Sequence[str]) -> list[ConvertResult]:
        return [self.convert(latex) for latex in latexes]


class KatexBatchConverter(Closing):
    """KaTeX under node (installed on first use), MathML parsed back into trees."""

    name = "katex"

    def __init__(self, settings: IndexerSettings | None = None) -> None:
        from mathsearch.indexer.katex_backend import KatexConverter

        self.settings = settings or IndexerSettings.from_env()
        self._katex = KatexConverter(self.settings)

    def convert_batch(self, latexes: Sequence[str]) -> list[ConvertResult]:
        from mathsearch.indexer.mathml_reader import parse_mathml

        results: list[ConvertResult] = []
        for output in self._katex.convert_batch(list(latexes)):
            if isinstance(output, IndexerError):
                results.append(output)
                continue
            try:
                results.append(Converted(parse_mathml(output, self.settings)))
            except IndexerError as exc:
                results.append(exc)
        return results

    def close(self) -> None:
        self._katex.close()


def make_converter(
    name: str | None = None, settings: IndexerSettings | None = None, strict: bool = False
) -> PythonConverter | KatexBatchConverter:
    """The converter called ``name`` (default: ``settings.converter``, MATHSEARCH_CONVERTER)."""
    settings = settings or IndexerSettings.from_env()
    name = name or settings.converter
    if name == "python":
        return PythonConverter(settings, strict=strict)
    if name == "katex":
        return KatexBatchConverter(settings)
    raise SettingsError(f"unknown converter {name!r}: use one of {', '.join(CONVERTERS)}")
