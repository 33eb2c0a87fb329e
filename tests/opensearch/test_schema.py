"""mathsearch.opensearch.schema: the equation mapping (pure; the live index is tested through
ensure_equation_index in the other opensearch tests)."""

from __future__ import annotations

from mathsearch.opensearch.schema import equation_properties


def test_no_field_is_stored_a_second_time_beside_the_source() -> None:
    # every field is in _source already; a stored copy (e.g. mathml's former "store": true)
    # costs ~270 B per equation on disk (docs/opensearch.md, "What an equation costs on disk")
    properties = equation_properties()
    assert [name for name, spec in properties.items() if spec.get("store")] == []
    assert properties["mathml"] == {"type": "text", "index": False}
