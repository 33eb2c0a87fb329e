"""The equation index of a retrieval evaluation: built once per collection and model, reused.

:func:`ensure_eval_index` indexes an evaluation collection
(:mod:`mathsearch.evaluation.relevance_sets`)
into the alias ``<prefix>-eval-<task>`` through the production pipeline in-process
(:func:`mathsearch.workers.index_job.run_index` with ``inline=True``: featurise, embed with the
default
model, bulk upsert, refresh) and records a fingerprint of the collection (ids, documents,
LaTeX) and of the model (vector field, ONNX SHA-256) in the index's ``_meta``
(``eval_collection``). A later call with the same collection and model finds that fingerprint
and the same document count and reuses the index; a different fingerprint drops the index and
builds it again. An existing index without the marker is someone else's and is never touched
(:class:`~mathsearch.core.errors.MappingError`).

Example::

    data = build_same_document([...], papers=100, topics=200)
    built = ensure_eval_index(connect(), eval_alias(settings, "same-document"), data.collection)
    built.reused, built.written, built.seconds
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import TransportError

from mathsearch.core.cluster_faults import client_url, cluster_fault
from mathsearch.core.errors import ClusterUnavailableError, MappingError
from mathsearch.evaluation.relevance_sets import CollectionEquation
from mathsearch.opensearch.schema import index_meta, resolve_alias, template_name
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)

MARKER = "eval_collection"


@dataclass
class EvalIndex:
    """What :func:`ensure_eval_index` found or built."""

    alias: str
    fingerprint: str
    vector_field: str
    model: str
    equations: int
    reused: bool
    written: int = 0
    failed: int = 0
    failures_by_stage: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: the vector field the evaluation's kNN searches and its model, when ``--encoders`` puts
    #: another encoder first (the index's default field stays ``vector_field``); "" = the same
    searched_field: str = ""
    searched_model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def eval_alias(settings: OpenSearchSettings, task: str) -> str:
    """``<prefix>-eval-<task>``."""
    return f"{settings.index_prefix}-eval-{task}"


#: Bumped when what the featuriser writes changes (2: ``canon_tokens``; 3: their algebraic
#: normal forms evaluated at points rather than built by SymPy; 4: logic formulas get prefix
#: tokens, so seq2seq embeds them).
FEATURISATION_VERSION = 4


def fingerprint(
    collection: Sequence[CollectionEquation],
    vector_field: str,
    model_sha: str,
    featurisation: str = "",
) -> str:
    """SHA-256 over the collection (in order), the model that embeds it and the featurisation
    (:data:`FEATURISATION_VERSION` and the settings that change the indexed tokens)."""
    digest = hashlib.sha256(f"{vector_field}\t{model_sha}\t{featurisation}\n".encode())
    for equation in collection:
        line = f"{equation.eq_id}\t{equation.doc_id}\t{equation.latex}\n"
        digest.update(line.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def drop_eval_index(client: OpenSearch, alias: str) -> None:
    """Delete the versions behind ``alias`` and its template (only call it on eval indexes)."""
    client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
    client.indices.delete_index_template(name=template_name(alias), ignore=404)


def _position(eq_id: str) -> int:
    tail = eq_id.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _records(collection: Sequence[CollectionEquation]) -> list[Any]:
    from mathsearch.indexer.records import EquationRecord

    return [
        EquationRecord(eq_id=e.eq_id, doc_id=e.doc_id, position=_position(e.eq_id), latex=e.latex)
        for e in collection
    ]


def _existing(client: OpenSearch, alias: str, print_: str) -> bool | None:
    """True: the alias holds this collection; False: an eval index of another; None: none."""
    if resolve_alias(client, alias) is None:
        if client.indices.exists(index=alias):
            raise MappingError(f"{alias} is an index, not an eval alias: pass another --index")
        return None
    marker = index_meta(client, alias).get(MARKER)
    if not isinstance(marker, dict):
        raise MappingError(
            f"{alias} exists and was not built by `mathsearch eval retrieval`: "
            "pass another --index (it is never overwritten)"
        )
    count = int(client.count(index=alias)["count"])
    return marker.get("fingerprint") == print_ and count == int(marker.get("equations", -1))


def _mark(client: OpenSearch, alias: str, marker: dict[str, Any]) -> None:
    found = client.indices.get_mapping(index=alias)
    meta = dict(next(iter(found.values()))["mappings"].get("_meta") or {})
    meta[MARKER] = marker
    client.indices.put_mapping(index=alias, body={"_meta": meta})


def ensure_eval_index(
    client: OpenSearch,
    alias: str,
    collection: Sequence[CollectionEquation],
    *,
    settings: OpenSearchSettings | None = None,
    progress: bool = True,
    encoders: Sequence[str] | None = None,
) -> EvalIndex:
    """Reuse or (re)build the eval index of ``collection``; see the module docstring.

    ``encoders`` (families or ``.onnx`` paths, the first the index's default vector field)
    replace the default model (``MATHSEARCH_MODEL``): each fills its own vector field.

    Raises:
        MappingError: ``alias`` names an index that is not an eval index.
        ClusterUnavailableError: the cluster does not answer.
    """
    from mathsearch.indexer.settings import IndexerSettings
    from mathsearch.runtime.embedders import encoder_card
    from mathsearch.runtime.model_card import load_card
    from mathsearch.runtime.settings import RuntimeSettings
    from mathsearch.workers.index_job import run_index

    settings = settings or OpenSearchSettings.from_env()
    names = list(encoders or [])
    cards = [encoder_card(n) for n in names] or [load_card(RuntimeSettings.from_env().model)]
    card = cards[0]
    featurisation = f"v{FEATURISATION_VERSION}:{IndexerSettings.from_env().canonical_form}"
    for extra in cards[1:]:
        featurisation += f":{extra.vector_field}:{extra.sha256}"
    print_ = fingerprint(collection, card.vector_field, card.sha256, featurisation)
    built = EvalIndex(alias, print_, card.vector_field, card.name, len(collection), reused=True)
    try:
        state = _existing(client, alias, print_)
        if state:
            logger.info("%s already holds this collection and model: reused", alias)
            return built
        if state is False:
            logger.info("%s holds another collection or model: rebuilding it", alias)
            drop_eval_index(client, alias)
        built.reused = False
        started = time.perf_counter()
        report = run_index(
            _records(collection), alias, inline=True, client=client, settings=settings,
            progress=progress, encoders=names or None,
        )  # fmt: skip
        built.written, built.failed = report.written, report.failed
        built.failures_by_stage = dict(report.failures_by_stage)
        count = int(client.count(index=alias)["count"])
        _mark(client, alias, {"fingerprint": print_, "equations": count, "model": card.name})
        built.seconds = time.perf_counter() - started
    except OSConnectionError as exc:
        line = cluster_fault(exc, client_url(client))
        raise ClusterUnavailableError(line or f"OpenSearch does not answer: {exc}") from exc
    except TransportError as exc:
        raise MappingError(f"cannot build the eval index {alias}: {exc}") from exc
    if built.failed:
        logger.warning(
            "%s: %d of %d equations failed to index (%s)",
            alias, built.failed, len(collection), built.failures_by_stage,
        )  # fmt: skip
    logger.info("%s: %d equations indexed in %.1f s", alias, built.written, built.seconds)
    return built
