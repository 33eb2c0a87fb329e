"""The bench query corpus: topic files and the documents beyond the real equations."""

from __future__ import annotations

import numpy as np

from mathsearch.bench.corpus import (
    BenchCorpus,
    ReplicaStats,
    iter_documents,
    read_topics,
)
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import Failure
from mathsearch.opensearch.latex_renaming import letter_permutation, rename_latex


def test_read_topics(tmp_path) -> None:
    path = tmp_path / "topics.txt"
    path.write_text("B.1 \t f(x)=x^2\nB.2\t\\frac{a}{b}\n\nbroken line\nB.3\t  \n", "utf-8")
    assert read_topics([path]) == [("B.1", "f(x)=x^2"), ("B.2", r"\frac{a}{b}")]


def test_iter_documents_adds_renamed_replicas(tmp_path) -> None:
    from types import SimpleNamespace

    featuriser = Featuriser()
    docs = []
    for i, latex in enumerate([r"x^2 + \frac{a}{b} = c", r"\sqrt{p^2 + m^2} \leq E", "f(t)"]):
        parsed = featuriser.parse_latex(latex)
        assert not isinstance(parsed, Failure)
        docs.append(
            {
                "eq_id": f"e{i}",
                "doc_id": "d",
                "position": i,
                "latex": latex,
                "math_tokens": parsed.math_tokens,
                "source": "test",
            }
        )
    featuriser.close()
    vectors = np.arange(12, dtype=np.float32).reshape(3, 4)
    extra = {"vec_x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    corpus = BenchCorpus(docs, vectors, [], {}, tmp_path, "key", extra=extra)
    stats = ReplicaStats()
    card = SimpleNamespace(sha256="c" * 64)
    models = [SimpleNamespace(vector_field="vec_x", card=card)]  # an extra encoder, unused
    out = list(
        iter_documents(corpus, 7, encoder=None, replica_vectors="copy", stats=stats, extra=models)
    )
    assert [doc["eq_id"] for doc, _, _ in out] == [
        "e0", "e1", "e2", "e0~r1", "e1~r1", "e2~r1", "e0~r2",
    ]  # fmt: skip
    assert out[3][0]["latex"] == rename_latex(docs[0]["latex"], letter_permutation(1))
    assert out[6][0]["latex"] == rename_latex(docs[0]["latex"], letter_permutation(2))
    assert np.array_equal(out[4][1], vectors[1])  # "copy": the original's vector
    # a replica keeps its original's second-stage vectors (renaming letters changes no field)
    assert np.array_equal(out[4][2]["vec_x"], extra["vec_x"][1])
    assert np.array_equal(out[0][2]["vec_x"], extra["vec_x"][0])
    assert (stats.documents, stats.skipped, stats.consistent) == (4, 0, 4)
    assert stats.to_dict("copy")["tokens_consistent"] == 1.0


def test_the_corpus_cache_key_follows_the_sources_content_not_their_mtime(tmp_path) -> None:
    import os
    from types import SimpleNamespace

    from mathsearch.bench.corpus import _corpus_key

    encoder = SimpleNamespace(card=SimpleNamespace(sha256="m" * 64, vocab_hash="v" * 12))
    source = tmp_path / "equation.txt"
    source.write_text("x^2 + y^2\n")
    first = _corpus_key([str(source)], None, encoder, "python")
    os.utime(source, (1, 1))  # the data folder copied again: same bytes, new mtime
    assert _corpus_key([str(source)], None, encoder, "python") == first
    source.write_text("x^2 + y^3\n")  # same size, other content
    assert _corpus_key([str(source)], None, encoder, "python") != first
    second = _corpus_key([str(source)], None, encoder, "python")
    assert _corpus_key([str(source)], None, encoder, "python", 40) != second  # other queries
