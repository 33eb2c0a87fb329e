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
        if not latex.strip():
            return ""
        from mathsearch.indexer.converters import make_converter
        from mathsearch.indexer.errors import IndexerError
        from mathsearch.indexer.mathml_tree import to_mathml

        with self._lock:
            if self._converter is None:
                self._converter = make_converter()
            result = self._converter.convert_batch([latex])[0]
        if isinstance(result, IndexerError):
            logger.warning("no MathML for %.60r: %s", latex, result)
            return ""
        return to_mathml(result.tree)

    def fill(self, hits: Sequence[Hit]) -> None:
        """Give every hit that has LaTeX but no stored MathML its rendering (in place)."""
        for hit in hits:
            if not hit.mathml and hit.latex:
                hit.mathml = self.render(hit.latex)

    def fill_source(self, source: dict[str, Any]) -> dict[str, Any]:
        """A stored ``_source`` with its MathML filled in the same way (``GET /equations``)."""
        if not source.get("mathml") and source.get("latex"):
            source["mathml"] = self.render(str(source["latex"]))
        return source
