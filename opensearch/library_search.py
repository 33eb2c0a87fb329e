"""Math search over a library's own enriched index: its documents ranked by their math.

``mathsearch index papers --format opensearch --field body --mode text --index papers-eq``
enriches the library's documents with ``math.*`` (:mod:`mathsearch.opensearch.enrichment`):
``math.tokens`` (every equation's math tokens, BM25), ``math.vector`` (the mean of the
equation vectors), ``math.eq_ids`` and ``math.index`` (the equation index the ids live in).
This module searches those fields:

* :func:`math_query` - the OpenSearch query clause of a formula (BM25 over ``math.tokens`` and
  kNN over ``math.vector``, with the query vector), for a library's own ``bool`` query. Pure
  when given the query's :class:`~mathsearch.opensearch.query_encoder.QueryFeatures`.
* :func:`search_library` - what ``mathsearch search LATEX --index papers`` runs: the BM25 list,
  the kNN list and, with ``text``, the library's own text field as a third list, read in one
  ``_msearch`` and fused as the equation modes fuse (:func:`~mathsearch.opensearch.fusion.fuse`:
  min-max, weighted arithmetic mean, or RRF); then, for the top documents, which of their
  equations matched (the equation index, grouped by document).

Weights of the ``fusion`` mode: ``[(1 - alpha), alpha]`` for BM25 and kNN, and with a text query
``[(1 - t)(1 - alpha), (1 - t) alpha, t]`` (``t``: ``text_weight``, default 0.5).

Example::

    library = describe_library(client, "papers")  # HNSW or exact vectors, the model
    clause = math_query(r"x^{-1}", library=library, encoder=ModelQueryEncoder())
    body = {"query": {"bool": {"must": [{"match": {"body": "gauge"}}], "should": [clause]}}}
    client.search(index="papers", body=body)

    response = search_library(client, "papers", r"E = mc^2", text="energy", text_field="body")
    response.hits[0].doc_id, response.hits[0].equations
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.core.errors import MappingError, QueryError
from mathsearch.indexer.query_variables import has_variables
from mathsearch.opensearch.enrichment import MATH_FIELD, index_properties
from mathsearch.opensearch.fusion import Combination, Normalization, fuse, rrf
from mathsearch.opensearch.query_encoder import QueryFeatures

logger = logging.getLogger(__name__)

__all__ = [
    "LIBRARY_MODES",
    "LibraryHit",
    "LibraryIndex",
    "LibraryResponse",
    "MatchedEquation",
    "describe_library",
    "formula_features",
    "is_library_index",
    "library_mode",
    "math_query",
    "search_library",
]

#: The modes a library search runs (the equation modes that need no per-equation window).
LIBRARY_MODES = ("fusion", "rrf", "bm25", "knn")
#: Title fields looked for when none is named.
TITLE_FIELDS = ("title", "name", "heading")
#: The text field a text query matches when the index has several and none is named.
DEFAULT_TEXT_FIELD = "body"
#: Equations shown per document hit.
EQUATIONS_PER_HIT = 3


@dataclass(frozen=True)
class LibraryIndex:
    """What an enriched library index offers a math search.

    Attributes:
        index: the index (or alias) name.
        vector: whether ``math.vector`` is mapped (else BM25 alone).
        model_field: the equation vector field the document vectors are means of
            (``math.model``, e.g. ``vec_gcn_v7``); the query must be embedded by that model.
        equations_index: the equation index ``math.eq_ids`` join to (``math.index``), if known.
        title_field: the field shown as a hit's title, if any.
        text_fields: the library's own text fields (candidates for ``text_field``).
        hnsw: whether ``math.vector`` has an HNSW graph (an index created with ``index.knn``);
            otherwise the kNN list scores every enriched document exactly (the k-NN plugin's
            ``knn_score`` script), as a library's existing index usually needs.
        space_type: the vector space of ``math.vector``'s scores.
    """

    index: str
    vector: bool
    model_field: str | None = None
    equations_index: str | None = None
    title_field: str | None = None
    text_fields: tuple[str, ...] = ()
    hnsw: bool = False
    space_type: str = "cosinesimil"


@dataclass
class MatchedEquation:
    """One of a document's equations that matched the query (from the equation index)."""

    eq_id: str
    score: float
    latex: str


@dataclass
class LibraryHit:
    """One library document: its rank, fused score, title and the subqueries' raw scores
    (``math_bm25``, ``math_knn``, ``text``; None: that list did not return it)."""

    rank: int
    doc_id: str
    score: float
    title: str | None = None
    scores: dict[str, float | None] = field(default_factory=dict)
    equation_count: int | None = None
    equations: list[MatchedEquation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LibraryResponse:
    """A library search's hits and how they were found."""

    index: str
    mode: str
    hits: list[LibraryHit]
    took_ms: float
    parameters: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    profile: str | None = None
    equations_index: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "library",
            "index": self.index,
            "mode": self.mode,
            "profile": self.profile,
            "model": self.model,
            "equations_index": self.equations_index,
            "parameters": dict(self.parameters),
            "took_ms": round(self.took_ms, 2),
            "warnings": list(self.warnings),
            "hits": [hit.to_dict() for hit in self.hits],
        }


def is_library_index(properties: Mapping[str, Any]) -> bool:
    """Whether a mapping's top-level properties hold the enrichment's ``math.tokens``.

    >>> is_library_index({"math": {"properties": {"tokens": {"type": "text"}}}})
    True
    >>> is_library_index({"math_tokens": {"type": "text"}, "eq_id": {"type": "keyword"}})
    False
    """
    math = properties.get(MATH_FIELD, {}).get("properties", {})
    return "tokens" in math


def library_mode(requested: str | None, profile_mode: str) -> str:
    """The mode of a library search: the one asked for, else the profile's, unless that is an
    equation-window mode (rescore, knn-rescore) with no library counterpart: then fusion.

    >>> library_mode(None, "rescore"), library_mode(None, "rrf"), library_mode("knn", "fusion")
    ('fusion', 'rrf', 'knn')
    """
    if requested:
        return requested
    return profile_mode if profile_mode in LIBRARY_MODES else "fusion"


def describe_library(
    client: Any,
    index: str,
    *,
    title_field: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> LibraryIndex:
    """What ``index`` offers a math search (one ``get_mapping`` unless its ``properties`` are
    given, one ``search`` of size 1).

    Raises:
        MappingError: no such index, or it was never enriched (no ``math.tokens``).
    """
    from opensearchpy.exceptions import NotFoundError

    if properties is None:
        try:
            properties = index_properties(client.indices.get_mapping(index=index))
        except NotFoundError as exc:
            raise MappingError(f"no index {index}") from exc
    if not is_library_index(properties):
        raise MappingError(
            f"{index} has no math.tokens: enrich it first (mathsearch index {index} "
            "--format opensearch --field FIELD --mode text --index EQUATION_INDEX)"
        )
    math = properties[MATH_FIELD]["properties"]
    text_fields = tuple(
        name for name, spec in properties.items() if spec.get("type") == "text" and name != "math"
    )
    if title_field is None:
        title_field = next((name for name in TITLE_FIELDS if name in properties), None)
    elif title_field not in properties:
        raise QueryError(f"{index} has no field {title_field!r} to show as the title")
    model_field = equations_index = None
    sample = client.search(
        index=index,
        body={
            "size": 1,
            "query": {"exists": {"field": f"{MATH_FIELD}.tokens"}},
            "_source": [f"{MATH_FIELD}.model", f"{MATH_FIELD}.index"],
        },
    )
    for hit in sample["hits"]["hits"]:
        math_source = hit.get("_source", {}).get(MATH_FIELD, {})
        model_field = math_source.get("model")
        equations_index = math_source.get("index")
    method = math.get("vector", {}).get("method") or {}
    space_type = method.get("space_type") or _space_of(model_field)
    return LibraryIndex(
        index=index,
        vector="vector" in math,
        model_field=model_field,
        equations_index=equations_index,
        title_field=title_field,
        text_fields=text_fields,
        hnsw=bool(method),
        space_type=space_type,
    )


def _bm25_clause(tokens: Sequence[str], boost: float | None = None) -> dict[str, Any]:
    inner: dict[str, Any] = {"query": " ".join(tokens)}
    if boost is not None:
        inner["boost"] = boost
    return {"match": {f"{MATH_FIELD}.tokens": inner}}


def _knn_clause(
    vector: Sequence[float],
    k: int,
    boost: float | None = None,
    *,
    exact: bool = False,
    space_type: str = "cosinesimil",
) -> dict[str, Any]:
    """The vector clause: an HNSW ``knn`` query, or (``exact``) a ``script_score`` of every
    enriched document with the k-NN plugin's ``knn_score`` script."""
    from mathsearch.opensearch.queries import knn_score_script

    field_name = f"{MATH_FIELD}.vector"
    if exact:
        inner: dict[str, Any] = {
            "query": {"exists": {"field": field_name}},
            "script": knn_score_script(field_name, vector, space_type),
        }
        if boost is not None:
            inner["boost"] = boost
        return {"script_score": inner}
    knn: dict[str, Any] = {"vector": [float(x) for x in vector], "k": int(k)}
    if boost is not None:
        knn["boost"] = boost
    return {"knn": {field_name: knn}}


def formula_features(latex: str, encoder: Any, *, embed: bool = True) -> QueryFeatures:
    """The formula featurised by ``encoder``; a pattern with query variables as a wildcard
    search's first stage sees it (its neutral form embedded, its structure tokens)."""
    if not has_variables(latex):
        return encoder.features(latex, embed=embed)  # type: ignore[no-any-return]
    from mathsearch.opensearch.wildcard_search import pattern_featuriser, wildcard_pattern

    pattern = wildcard_pattern(latex, pattern_featuriser())
    features: QueryFeatures = encoder.features(pattern.neutral_latex, embed=embed)
    return features._replace(tokens=list(pattern.structure_tokens))


def math_query(
    latex: str = "",
    *,
    features: QueryFeatures | None = None,
    encoder: Any = None,
    k: int = 100,
    bm25_boost: float | None = None,
    knn_boost: float | None = None,
    vector: bool = True,
    exact: bool = False,
    space_type: str = "cosinesimil",
    library: LibraryIndex | None = None,
) -> dict[str, Any]:
    """The OpenSearch query clause of a formula over an enriched index's ``math.*`` fields.

    A ``bool`` whose ``should`` holds the BM25 ``match`` of the query's math tokens on
    ``math.tokens`` and, with ``vector``, a ``knn`` clause of the query vector on
    ``math.vector`` (``k`` neighbours); drop it into your own ``bool`` (``should`` beside your
    text query, or ``must``) or use each part as a sub-query of a ``hybrid`` query. A bool
    query adds the raw scores (BM25 is unbounded, kNN in [0, 1]); ``bm25_boost`` /
    ``knn_boost`` weigh them.

    Args:
        latex: the formula (ignored when ``features`` is given).
        features: the query already featurised (``ModelQueryEncoder().features(latex)``); the
            function is then pure.
        encoder: a :class:`~mathsearch.opensearch.query_encoder.ModelQueryEncoder` to featurise
            ``latex`` with (default: a new one with the shipped model; keep one per process).
        k: neighbours of the kNN clause (100).
        bm25_boost / knn_boost: ``boost`` of each clause (None: none written).
        vector: False - the BM25 clause alone (no model run).
        exact: the vector clause as a ``script_score`` of every enriched document (an index
            created without ``index.knn`` has no HNSW graph for ``math.vector``:
            :func:`describe_library` tells, ``LibraryIndex.hnsw``) in ``space_type``.
        library: the index's :func:`describe_library`: sets ``exact``, ``space_type`` and
            ``vector`` (no ``math.vector``: the BM25 clause alone) from it.

    Returns:
        ``{"bool": {"should": [match, knn], "minimum_should_match": 1}}``.

    A formula with query variables (``?x``, ``\\qvar{x}``) gives the clause of a wildcard
    search's first stage: BM25 over the tokens without a variable, the kNN of the pattern with
    its variables made neutral (recall); the structural check and the bindings are the
    searcher's (:mod:`mathsearch.opensearch.wildcard_search`).

    Raises:
        QueryError: the formula has no math tokens, or (with ``vector``) the encoder gave no
            vector, or its query variables are malformed.

    >>> f = QueryFeatures(["mi:x", "mo:="], [0.6, 0.8], "vec_gcn_v7")
    >>> math_query(features=f, k=5)["bool"]["should"][1]
    {'knn': {'math.vector': {'vector': [0.6, 0.8], 'k': 5}}}
    """
    if library is not None:
        exact, space_type = not library.hnsw, library.space_type
        vector = vector and library.vector
    if features is None:
        if not latex.strip():
            raise QueryError("math_query needs a formula")
        if encoder is None:
            from mathsearch.opensearch.query_encoder import ModelQueryEncoder

            encoder = ModelQueryEncoder()
        features = formula_features(latex, encoder, embed=vector)
    if not features.tokens:
        raise QueryError("the formula has no math tokens")
    should = [_bm25_clause(features.tokens, bm25_boost)]
    if vector:
        if features.vector is None:
            reasons = "; ".join((features.refusals or {}).values()) or "no vector"
            raise QueryError(f"the encoder gave the formula no vector: {reasons}")
        should.append(
            _knn_clause(features.vector, k, knn_boost, exact=exact, space_type=space_type)
        )
    return {"bool": {"should": should, "minimum_should_match": 1}}


def _list(response: Mapping[str, Any]) -> list[tuple[str, float]]:
    return [(str(hit["_id"]), float(hit["_score"])) for hit in response["hits"]["hits"]]


def search_library(
    client: Any,
    index: str,
    latex: str,
    *,
    text: str = "",
    text_field: str | None = None,
    mode: str = "fusion",
    k: int = 10,
    alpha: float = 0.4,
    depth: int = 100,
    text_weight: float = 0.5,
    rank_constant: int = 60,
    normalization: Normalization | str = Normalization.MIN_MAX,
    combination: Combination | str = Combination.ARITHMETIC_MEAN,
    encoder: Any = None,
    library: LibraryIndex | None = None,
    title_field: str | None = None,
    equations_index: str | None = None,
    equations: bool = True,
    profile: str | None = None,
) -> LibraryResponse:
    """Rank the documents of an enriched library index by a formula (see the module docstring).

    Args:
        client: an ``opensearchpy.OpenSearch``.
        index: the library's index (enriched with ``math.*``).
        latex: the formula.
        text / text_field: the library's own text query and the field it matches (default:
            the index's only text field, else ``body``); a third fused list.
        mode: ``fusion`` (default), ``rrf``, ``bm25`` or ``knn``.
        k / depth: hits returned / hits per list before fusion.
        alpha: the vector side's weight in ``fusion`` (0.4, the shipped profile's).
        text_weight: the text list's weight in ``fusion`` when there is one (0.5).
        encoder: a ``ModelQueryEncoder`` (default: one with the model of ``math.model``).
        equations_index: the equation index for the matched equations (default ``math.index``;
            none known: hits carry no equations and the response says so).
        equations: False - skip the matched equations (a ranking alone).
        profile: the search profile's label, reported back.

    Raises:
        QueryError: a bad mode, weight or field, or a formula the model refuses (vector modes).
        MappingError: the index does not exist or is not enriched.
    """
    started = time.perf_counter()
    if mode not in LIBRARY_MODES:
        raise QueryError(f"a library index is searched in {', '.join(LIBRARY_MODES)}, not {mode}")
    if not 0.0 <= alpha <= 1.0 or not 0.0 <= text_weight < 1.0:
        raise QueryError(f"alpha must be in [0, 1] and text_weight in [0, 1), not {alpha}, "
                         f"{text_weight}")  # fmt: skip
    if k < 1 or depth < 1:
        raise QueryError(f"k and depth must be at least 1, not {k} and {depth}")
    library = library or describe_library(client, index, title_field=title_field)
    if text and not text_field:
        text_field = _default_text_field(library)
    warnings: list[str] = []
    wants_vector = mode != "bm25"
    if wants_vector and not library.vector:
        raise QueryError(f"{index} has no math.vector: use --mode bm25")
    if encoder is None:
        from mathsearch.opensearch.query_encoder import ModelQueryEncoder

        encoder = ModelQueryEncoder(_model_of(library.model_field) if wants_vector else None)
    features: QueryFeatures = formula_features(latex, encoder, embed=wants_vector)
    if not features.tokens:
        raise QueryError("the formula has no math tokens")
    if wants_vector and features.vector is None:
        reasons = "; ".join((features.refusals or {}).values()) or "no vector"
        raise QueryError(f"the model gave the formula no vector: {reasons}")
    if wants_vector and library.model_field and features.vector_field != library.model_field:
        raise QueryError(
            f"{index}'s math.vector holds {library.model_field} vectors, the query model writes "
            f"{features.vector_field}"
        )
    names: list[str] = []
    bodies: list[dict[str, Any]] = []
    source = [name for name in (library.title_field, f"{MATH_FIELD}.equation_count") if name]
    if mode != "knn":
        names.append("math_bm25")
        bodies.append({"query": _bm25_clause(features.tokens)})
    if wants_vector:
        names.append("math_knn")
        clause = _knn_clause(
            features.vector or [], depth, exact=not library.hnsw, space_type=library.space_type
        )
        bodies.append({"query": clause})
    if text:
        names.append("text")
        bodies.append({"query": {"match": {text_field: {"query": text}}}})
    lines: list[dict[str, Any]] = []
    for body in bodies:
        lines += [{"index": index}, {**body, "size": depth, "_source": source}]
    answers = client.msearch(body=lines)["responses"]
    for name, answer in zip(names, answers, strict=True):
        if "error" in answer:
            reason = answer["error"].get("reason") if isinstance(answer["error"], dict) else None
            raise QueryError(f"{index} refused the {name} list: {reason or answer['error']}")
    lists = [_list(answer) for answer in answers]
    sources = {
        str(hit["_id"]): hit.get("_source", {})
        for answer in answers
        for hit in answer["hits"]["hits"]
    }
    weights = _weights(mode, alpha, text_weight, names)
    fused: list[tuple[str, float, tuple[float | None, ...]]]
    if len(lists) == 1:
        fused = [(doc, score, (score,)) for doc, score in lists[0][:k]]
    else:
        hits = (
            rrf(lists, rank_constant=rank_constant, limit=k)
            if mode == "rrf"
            else fuse(lists, normalization=Normalization(normalization),
                      combination=Combination(combination), weights=weights, limit=k)
        )  # fmt: skip
        fused = [(hit.doc_id, hit.score, hit.raw) for hit in hits]
    results = []
    for rank, (doc_id, score, raw) in enumerate(fused[:k], start=1):
        doc = sources.get(doc_id, {})
        title = _dotted(doc, library.title_field) if library.title_field else None
        results.append(
            LibraryHit(
                rank=rank,
                doc_id=doc_id,
                score=float(score),
                title=None if title is None else str(title),
                scores=dict(zip(names, raw, strict=True)),
                equation_count=(doc.get(MATH_FIELD) or {}).get("equation_count"),
            )
        )
    where = equations_index or library.equations_index
    if equations and results:
        if where:
            _attach_equations(client, where, latex, results, encoder)
        else:
            warnings.append(
                f"{index} does not name its equation index (math.index): no matched equations; "
                "pass --equations INDEX"
            )
    parameters: dict[str, Any] = {"k": k, "depth": depth}
    if mode == "fusion":
        parameters.update(alpha=alpha, weights=[round(w, 4) for w in weights])
    elif mode == "rrf":
        parameters["rank_constant"] = rank_constant
    if text:
        parameters.update(text_field=text_field, text_weight=text_weight)
    return LibraryResponse(
        index=index,
        mode=mode,
        hits=results,
        took_ms=(time.perf_counter() - started) * 1000,
        parameters=parameters,
        model=features.vector_field if wants_vector else None,
        profile=profile,
        equations_index=where,
        warnings=warnings,
    )


def _default_text_field(library: LibraryIndex) -> str:
    """The field a text query matches when none is named: the only text field, else ``body``.

    Raises:
        QueryError: several text fields and none is ``body``, or none at all.
    """
    if len(library.text_fields) == 1:
        return library.text_fields[0]
    if DEFAULT_TEXT_FIELD in library.text_fields:
        return DEFAULT_TEXT_FIELD
    fields = ", ".join(library.text_fields) or "none"
    raise QueryError(f"name the field the text query matches (--text-field; {fields})")


def _weights(mode: str, alpha: float, text_weight: float, names: Sequence[str]) -> list[float]:
    """The fusion weights of the lists ``names`` (see the module docstring).

    >>> _weights("fusion", 0.4, 0.5, ["math_bm25", "math_knn", "text"])
    [0.3, 0.2, 0.5]
    """
    by_name = {"math_bm25": 1.0 - alpha, "math_knn": alpha}
    if mode == "knn":
        by_name = {"math_knn": 1.0}
    elif mode == "bm25":
        by_name = {"math_bm25": 1.0}
    math_share = 1.0 - text_weight if "text" in names else 1.0
    weights = [by_name.get(name, 0.0) * math_share for name in names if name != "text"]
    if "text" in names:
        weights.append(text_weight)
    total = sum(weights) or 1.0
    return [round(w / total, 10) for w in weights]


def _dotted(doc: Mapping[str, Any], path: str) -> Any:
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _model_of(model_field: str | None) -> str | None:
    """The shipped model that writes ``model_field`` (``vec_gcn_v7`` -> ``gcn-v7.onnx``; None:
    the default model, whose field the search then checks).

    >>> Path(_model_of("vec_gcn_v7") or "").name
    'gcn-v7.onnx'
    """
    from mathsearch.runtime.embedders import shipped_or_path
    from mathsearch.runtime.model_card import model_name_of_field

    name = model_name_of_field(model_field or "")
    if name is None:
        return None
    path = shipped_or_path(f"{name}.onnx")
    return path if Path(path).is_file() else None


def _space_of(model_field: str | None) -> str:
    """The space type of the shipped model that writes ``model_field`` (cosinesimil when
    unknown: every shipped equation model's)."""
    path = _model_of(model_field)
    if path is None:
        return "cosinesimil"
    from mathsearch.runtime.model_card import load_card

    return str(load_card(path, verify_sha256=False).space_type)


def _attach_equations(
    client: Any, equations_index: str, latex: str, hits: list[LibraryHit], encoder: Any
) -> None:
    """Each hit's best-matching equations (the equation index's BM25 + kNN fusion, grouped by
    document, restricted to the hits' documents)."""
    from mathsearch.opensearch.queries import Filters, Mode
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.searcher import Searcher

    searcher = Searcher(client, equations_index, encoder=encoder)
    request = SearchRequest(
        latex,
        mode=Mode.FUSION,
        k=len(hits),
        group=True,
        depth=max(100, EQUATIONS_PER_HIT * len(hits)),
        window=max(100, EQUATIONS_PER_HIT * len(hits)),
        filters=Filters(doc_ids=tuple(hit.doc_id for hit in hits)),
    )
    try:
        response = searcher.search(request)
    except (QueryError, MappingError) as exc:
        logger.warning("matched equations from %s: %s", equations_index, exc)
        return
    by_doc = {group.doc_id: group for group in response.groups or []}
    for hit in hits:
        group = by_doc.get(hit.doc_id)
        if group is None:
            continue
        hit.equations = [
            MatchedEquation(eq_id=h.eq_id, score=float(h.score), latex=h.latex)
            for h in group.hits[:EQUATIONS_PER_HIT]
        ]
