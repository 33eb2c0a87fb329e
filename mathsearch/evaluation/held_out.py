"""The papers the default model never trained on, for ``eval retrieval --task same-document``.

The model card (``MATHSEARCH_MODEL``, else the shipped default) records the paper split of its
training run (test fraction, seed, limit) and the size of the corpus (equations, papers); a model
trained with ``--shared-data`` records the size of the ``hepth2003`` corpus whose test side it held
out of every source (:mod:`mathsearch.encoders.shared_corpus`). The corpus of the shipped model is
``../shared/data/hepth2003`` (equation.txt + eqnarray.txt, docs/encoders.md, "The shared training
data"); :func:`held_out_papers` rebuilds it with the same featurisation, redoes
:meth:`EquationCorpus.split_by_paper` and returns the test side's paper ids. A rebuilt corpus of
another size means other sources: refused rather than guessed. No torch is imported.

Example::

    papers = held_out_papers()            # 95 of gcn-v1's 474 papers
    build_same_document([...], papers=100, topics=200, only_papers=papers)
"""

from __future__ import annotations

import logging
from typing import Any

from mathsearch.indexer.errors import IndexerError

logger = logging.getLogger(__name__)


def held_out_papers() -> list[str]:
    """The hep-th paper ids the default model never trained on (see the module docstring).

    Raises:
        EvaluationError: the card records no split, the corpus cannot be rebuilt, or it does
            not match the card's size.
    """
    return _papers("held-out")


def validation_papers() -> list[str]:
    """The hep-th paper ids the default model neither trained on nor is tested on (the
    validation papers of a ``--shared-data`` run), for tuning the search defaults.

    Raises:
        EvaluationError: as :func:`held_out_papers`, or the card records no validation split.
    """
    return _papers("validation")


def _papers(side: str) -> list[str]:
    from mathsearch.core.errors import EvaluationError
    from mathsearch.encoders.corpus import CorpusError, EquationCorpus
    from mathsearch.evaluation.relevance_sets import SHARED_DATA
    from mathsearch.indexer.parse import Featuriser
    from mathsearch.runtime.model_card import load_card
    from mathsearch.runtime.settings import RuntimeSettings

    card = load_card(RuntimeSettings.from_env().model)
    split = dict(card.training.get("split") or {})
    data = dict(card.training.get("data") or {})
    data = {**data, "all": data.get("hepth2003") or data.get("all")}  # --shared-data cards
    if "test_fraction" not in split or not data["all"]:
        raise EvaluationError(f"the card of {card.name} records no paper split: no --{side}")
    validation: Any = split.get("validation")  # the card's JSON
    if side == "validation" and not validation:
        raise EvaluationError(f"the card of {card.name} records no validation papers")
    sources = [str(SHARED_DATA / "hepth2003" / name) for name in ("equation.txt", "eqnarray.txt")]
    try:
        with Featuriser() as featuriser:
            corpus = EquationCorpus.from_sources(
                sources, "hepth", split.get("limit"), featuriser=featuriser
            )
        rest, test = corpus.split_by_paper(float(split["test_fraction"]), int(split.get("seed", 0)))
        if side == "validation":
            _, test = rest.split_by_paper(
                float(validation["test_fraction"]), int(validation["seed"])
            )
    except (CorpusError, IndexerError, OSError) as exc:
        raise EvaluationError(f"cannot rebuild the training corpus of {card.name}: {exc}") from exc
    if (len(corpus), corpus.num_papers) != (data["all"]["equations"], data["all"]["papers"]):
        raise EvaluationError(
            f"{card.name} trained on {data['all']['papers']} papers / {data['all']['equations']} "
            f"equations, the shared hep-th corpus gives {corpus.num_papers} / {len(corpus)}: "
            f"its {side} papers cannot be told"
        )
    logger.info("%s: %d %s papers of %d", card.name, test.num_papers, side, corpus.num_papers)
    return list(test.paper_ids)
