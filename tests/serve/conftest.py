"""Fixtures shared with tests/opensearch (the sample index, the encoder, the searcher)."""

from tests.opensearch.conftest import (  # noqa: F401 - pytest finds fixtures by name
    demo_dicts,
    demo_parsed,
    demo_vectors,
    encoder,
    equation_alias,
    fresh_alias,
    searcher,
)
