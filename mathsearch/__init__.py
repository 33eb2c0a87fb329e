"""mathsearch: math search for OpenSearch.

One namespace for the whole project. The packages (``mathsearch.indexer``, ``.encoders``,
``.export``, ``.opensearch``, ``.workers``) keep their folders at the top of the repository; the
build maps them under ``mathsearch`` (``[tool.setuptools] package-dir`` in ``pyproject.toml``).

The names a library user needs are re-exported here, lazily (``import mathsearch`` imports
neither OpenSearch, Celery nor torch):

>>> import mathsearch
>>> featuriser = mathsearch.Featuriser()                     # LaTeX/MathML -> tokens + graph
>>> records = mathsearch.extract(["paper.tex"], "tex")       # equations of documents
>>> embedder = mathsearch.load_embedder("gcn")               # the shipped ONNX model
>>> searcher = mathsearch.Searcher(client, "mathsearch-equations")
>>> searcher.search(mathsearch.SearchProfile.default().request(r"x^{-1}"))  # as the CLI
>>> searcher.search(mathsearch.SearchRequest(r"x^{-1}", mode="rrf"))     # bare defaults
>>> mathsearch.run_index(records, index="mathsearch-equations")   # the Celery index job
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "Featuriser": "mathsearch.indexer.parse",
    "extract": "mathsearch.indexer.extract",
    "load_embedder": "mathsearch.runtime.embedders",
    "Searcher": "mathsearch.opensearch.searcher",
    "SearchRequest": "mathsearch.opensearch.search_request",
    "SearchProfile": "mathsearch.opensearch.search_profile",
    "run_index": "mathsearch.workers.index_job",
    "IndexReport": "mathsearch.workers.index_job",
}

__all__ = [
    "IndexReport",
    "SearchProfile",
    "SearchRequest",
    "Searcher",
    "extract",
    "load_embedder",
    "run_index",
]
__all__ += ["Featuriser", "__version__"]


__getattr__ = lazy_exports("mathsearch", _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
