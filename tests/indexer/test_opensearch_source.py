"""Reading equations out of an existing index of the REAL local OpenSearch node.

The index has more documents than one page (``batch_size=7``), three shards, documents with one
equation, with a list of them, and without the field; every equation must come back exactly
once and every point in time must be gone afterwards.
"""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import OpenSearchWarning

from mathsearch.indexer import opensearch_source as source_module
from mathsearch.indexer.opensearch_source import iter_opensearch_index
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch import ClusterUnavailableError, MathsearchOpenSearchError, connect
from mathsearch.opensearch.settings import OpenSearchSettings

DOCS = 31
MISSING = {3, 11, 12, 25}  # documents without the latex field


def _doc(i: int) -> dict:
    doc: dict = {"paper": f"paper-{i:02d}", "meta": {"section": f"Section {i % 3}"}, "n": i}
    if i in MISSING:
        return doc
    if i % 4 == 1:
        doc["latex"] = [f"x_{{{i}}} + {j}" for j in range(3)]
    else:
        doc["latex"] = f"\\frac{{{i}}}{{2}}"
    return doc


def _expected(doc_key: str = "_id") -> Counter:
    expected: Counter = Counter()
    for i in range(DOCS):
        doc = _doc(i)
        if "latex" not in doc:
            continue
        doc_id = f"d{i:02d}" if doc_key == "_id" else doc["paper"]
        values = doc["latex"] if isinstance(doc["latex"], list) else [doc["latex"]]
        for position, latex in enumerate(values):
            expected[(f"{doc_id}#{position}", doc_id, position, latex)] += 1
    return expected


def _pits(client: OpenSearch) -> set[str]:
    return {pit["pit_id"] for pit in client.get_all_pits().get("pits", [])}


@pytest.fixture
def latex_index(client: OpenSearch, index_name: str) -> str:
    client.indices.create(
        index=index_name,
        body={
            "settings": {"number_of_shards": 3, "number_of_replicas": 0},
            "mappings": {
                "properties": {
                    "latex": {"type": "text", "index": False},
                    "paper": {"type": "keyword"},
                    "n": {"type": "integer"},
                }
            },
        },
    )
    ok, errors = helpers.bulk(
        client,
        ({"_index": index_name, "_id": f"d{i:02d}", "_source": _doc(i)} for i in range(DOCS)),
        refresh=True,
        raise_on_error=False,
    )
    assert (ok, errors) == (DOCS, [])
    return index_name


def _split(items: list) -> tuple[list[EquationRecord], list[Failure]]:
    records = [item for item in items if isinstance(item, EquationRecord)]
    failures = [item for item in items if isinstance(item, Failure)]
    assert len(records) + len(failures) == len(items)
    return records, failures


@pytest.mark.services
def test_every_equation_comes_back_exactly_once(client: OpenSearch, latex_index: str) -> None:
    pits_before = _pits(client)
    with warnings.catch_warnings():  # the _id sort of 2.x clusters warns nothing on the way
        warnings.simplefilter("error", OpenSearchWarning)
        items = list(iter_opensearch_index(client, latex_index, "latex", batch_size=7))
    records, failures = _split(items)
    got = Counter((r.eq_id, r.doc_id, r.position, r.latex) for r in records)
    assert got == _expected()
    assert max(got.values()) == 1
    assert sorted(f.doc_id for f in failures) == [f"d{i:02d}" for i in sorted(MISSING)]
    for failure in failures:
        assert (failure.stage, failure.reason) == ("extract", "missing-field")
        assert failure.source == f"opensearch:{latex_index}/{failure.doc_id}"
    assert all(r.source.startswith(f"opensearch:{latex_index}/") for r in records)
    assert _pits(client) - pits_before == set()


@pytest.mark.services
def test_shard_doc_falls_back_to_id_on_clusters_without_it(
    client: OpenSearch, latex_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 3.3 the node refuses ``_shard_doc``; the reader must switch to ``_id`` and lose
    nothing. Forces the ``_shard_doc`` first try whatever the node's version."""
    major, minor = (int(p) for p in client.info()["version"]["number"].split(".")[:2])
    monkeypatch.setattr(source_module, "_initial_sort", lambda _client: [{"_shard_doc": "asc"}])
    items = list(iter_opensearch_index(client, latex_index, "latex", batch_size=7))
    records, _ = _split(items)
    assert Counter((r.eq_id, r.doc_id, r.position, r.latex) for r in records) == _expected()
    expected_sort = [{"_shard_doc": "asc"}] if (major, minor) >= (3, 3) else [{"_id": "asc"}]
    monkeypatch.undo()
    assert source_module._initial_sort(client) == expected_sort


@pytest.mark.services
def test_id_and_section_fields_and_a_query(client: OpenSearch, latex_index: str) -> None:
    items = list(
        iter_opensearch_index(
            client,
            latex_index,
            "latex",
            id_field="paper",
            section_field="meta.section",
            batch_size=7,
            query={"range": {"n": {"lt": 10}}},
        )
    )
    records, failures = _split(items)
    expected = Counter(
        key for key in _expected("paper").elements() if int(key[1].split("-")[1]) < 10
    )
    assert Counter((r.eq_id, r.doc_id, r.position, r.latex) for r in records) == expected
    assert {r.section for r in records if r.doc_id == "paper-05"} == {"Section 2"}
    assert [f.doc_id for f in failures] == ["paper-03"]


@pytest.mark.services
def test_stopping_early_deletes_the_point_in_time(client: OpenSearch, latex_index: str) -> None:
    pits_before = _pits(client)
    iterator = iter_opensearch_index(client, latex_index, "latex", batch_size=7)
    first = [next(iterator) for _ in range(3)]
    assert len(_pits(client) - pits_before) == 1  # open while reading
    iterator.close()
    assert len(first) == 3
    assert _pits(client) - pits_before == set()


@pytest.mark.services
def test_progress_bar_only_when_asked(
    client: OpenSearch, latex_index: str, capsys: pytest.CaptureFixture[str]
) -> None:
    list(iter_opensearch_index(client, latex_index, "latex", batch_size=7))
    assert capsys.readouterr().err == ""
    list(iter_opensearch_index(client, latex_index, "latex", batch_size=7, progress=True))
    err = capsys.readouterr().err
    assert f"reading {latex_index}" in err
    assert f"{DOCS}/{DOCS}" in err


@pytest.mark.services
def test_text_mode_extracts_display_math_from_full_text(
    client: OpenSearch, index_name: str
) -> None:
    bodies = {
        f"t{i}": (
            f"Paper {i} shows \\begin{{equation}} a_{{{i}}} = b \\end{{equation}} and "
            f"\\begin{{align}} x &= {i} \\\\ y &= z \\end{{align}} then $$w^{i}$$."
        )
        for i in range(10)
    }
    bodies["t10"] = "Only inline $x$ here."
    docs = {key: {"body": body, "title": key.upper()} for key, body in bodies.items()}
    docs["t11"] = {"title": "NO BODY"}
    client.indices.create(index=index_name, body={"settings": {"number_of_shards": 2}})
    helpers.bulk(
        client,
        ({"_index": index_name, "_id": key, "_source": doc} for key, doc in docs.items()),
        refresh=True,
    )
    items = list(
        iter_opensearch_index(
            client, index_name, "body", mode="text", section_field="title", batch_size=3
        )
    )
    records, failures = _split(items)
    expected = Counter()
    for i in range(10):
        for position, latex in enumerate([f"a_{{{i}}} = b", f"x = {i}", "y = z", f"w^{i}"]):
            expected[(f"t{i}#{position}", f"t{i}", position, latex)] += 1
    assert Counter((r.eq_id, r.doc_id, r.position, r.latex) for r in records) == expected
    for record in records:
        assert record.section == record.doc_id.upper()
        assert record.context.startswith(f"Paper {record.doc_id[1:]} shows")
    assert [(f.doc_id, f.reason) for f in failures] == [("t11", "missing-field")]


@pytest.mark.services
def test_missing_index_raises_a_typed_error(client: OpenSearch, index_name: str) -> None:
    with pytest.raises(MathsearchOpenSearchError, match="index_not_found"):
        list(iter_opensearch_index(client, index_name, "latex"))


@pytest.mark.services
def test_partial_shard_failure_raises_instead_of_losing_documents(
    client: OpenSearch, index_name: str
) -> None:
    """A query that fails on some shards only (``n`` is a number in one index, a keyword in the
    other) must not quietly return the other shards' documents."""
    names = [f"{index_name}-int", f"{index_name}-kw"]
    pits_before = _pits(client)
    try:
        for name, kind, value in zip(names, ["integer", "keyword"], [1, "abc"], strict=True):
            client.indices.create(
                index=name,
                body={
                    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                    "mappings": {"properties": {"n": {"type": kind}}},
                },
            )
            client.index(index=name, id="1", body={"n": value, "latex": "x"}, refresh=True)
        with pytest.raises(MathsearchOpenSearchError, match="1 of 2 shards failed"):
            list(
                iter_opensearch_index(
                    client, ",".join(names), "latex", query={"term": {"n": "abc"}}
                )
            )
        assert _pits(client) - pits_before == set()
    finally:
        client.indices.delete(index=",".join(names), ignore_unavailable=True)


def test_unreachable_cluster_raises_cluster_unavailable() -> None:
    dead = connect(OpenSearchSettings(url="http://127.0.0.1:9"), max_retries=0, timeout=2)
    with pytest.raises(ClusterUnavailableError) as raised:
        list(iter_opensearch_index(dead, "anything", "latex"))
    # one reason, said once (opensearch-py's text repeats the underlying exception)
    assert "OpenSearch at http://127.0.0.1:9 does not answer (Connection refused)" in str(
        raised.value
    )
    assert "caused by" not in str(raised.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"mode": "pdf"}, "mode"), ({"batch_size": 0}, "batch_size"), ({"field": ""}, "field")],
)
def test_bad_arguments_are_refused_before_any_request(kwargs: dict, message: str) -> None:
    dead = connect(OpenSearchSettings(url="http://127.0.0.1:9"), max_retries=0, timeout=2)
    arguments = {"field": "latex", **kwargs}
    with pytest.raises(ValueError, match=message):
        list(iter_opensearch_index(dead, "anything", **arguments))
