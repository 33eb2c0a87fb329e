"""Fixtures shared with tests/opensearch and tests/workers (sample index, Celery pipeline)."""

from tests.opensearch.conftest import (  # noqa: F401 - pytest finds fixtures by name
    demo_dicts,
    demo_parsed,
    demo_vectors,
    encoder,
    equation_alias,
    fresh_alias,
    searcher,
)
from tests.workers.conftest import corpus, pipeline  # noqa: F401
