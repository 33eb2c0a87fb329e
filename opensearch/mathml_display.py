"""Presentation MathML for hits whose index keeps only the LaTeX.

The index stores an equation's MathML only when it came in as MathML
(:func:`mathsearch.opensearch.documents.keeps_mathml`): for LaTeX input the stored MathML was
the configured converter's rendering of the LaTeX, ~1.2 kB per equation, so searches that ask
for MathML (the search page does) render it again here - the same converter, the same string
(checked on 2,000 hep-th equations), ~0.1 ms per equation with the default ``python`` one.

A LaTeX string the converter cannot read leaves the hit without MathML (logged), never fails the
search.

Example::

    renderer = MathMLRenderer()
    renderer.fill(hits)  # hits without stored MathML get the rendering of their LaTeX
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from mathsearch.opensearch.results import Hit

logger = logging.getLogger(__name__)

__all__ = ["MathMLRenderer"]


class MathMLRenderer:
    """LaTeX -> Presentation MathML with the indexer's configured converter (created on first
    use, one conversion at a time)."""

    def __init__(self) -> None:
        self._converter: Any = None
        self._lock = threading.Lock()

    def render(self, latex: str) -> str:
        """The MathML of ``latex`` as the indexer renders it; ``""`` when it cannot be read."""
        return self.render_batch([latex])[0]

    def convert_batch(self, latexes: Sequence[str]) -> list[Any]:
        """The converter's own results (a tree with its unknown macros, or an ``IndexerError``)
        of each, in one call; the one converter of the process (``POST /render`` uses it too)."""
        from mathsearch.indexer.converters import make_converter

        with self._lock:
            if self._converter is None:
                self._converter = make_converter()
            return self._converter.convert_batch(list(latexes))

    def render_batch(self, latexes: Sequence[str]) -> list[str]:
        """:meth:`render` of each, in one converter call (one exchange with node for KaTeX)."""
        from mathsearch.indexer.errors import IndexerError
        from mathsearch.indexer.mathml_tree import to_mathml

        todo = [i for i, latex in enumerate(latexes) if latex.strip()]
        out = [""] * len(latexes)
        if not todo:
            return out
        results = self.convert_batch([latexes[i] for i in todo])
        for i, result in zip(todo, results, strict=True):
            if isinstance(result, IndexerError):
                logger.warning("no MathML for %.60r: %s", latexes[i], result)
            else:
                out[i] = to_mathml(result.tree)
        return out

    def fill(self, hits: Sequence[Hit]) -> None:
        """Give every hit that has LaTeX but no stored MathML its rendering (in place)."""
        missing = [hit for hit in hits if not hit.mathml and hit.latex]
        for hit, mathml in zip(missing, self.render_batch([h.latex for h in missing]), strict=True):
            hit.mathml = mathml

    def close(self) -> None:
        """Stop the converter's helper process, if it has one (KaTeX's node)."""
        with self._lock:
            if self._converter is not None and hasattr(self._converter, "close"):
                self._converter.close()
            self._converter = None

    def fill_source(self, source: dict[str, Any]) -> dict[str, Any]:
        """A stored ``_source`` with its MathML filled in the same way (``GET /equations``)."""
        if not source.get("mathml") and source.get("latex"):
            source["mathml"] = self.render(str(source["latex"]))
        return source
