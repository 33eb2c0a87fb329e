"""A seeded split of SemVec validation classes into an unseen and a seen part.

Every class of a SemVec validation split also occurs in its train split (other members), so a
model trained on the train split has seen every validation class: its validation score_5 (the
seed's Table 16) measures classes it trained on. The project's test splits hold classes that no
training split has. To measure that here, :func:`split_classes` draws a share of each validation
split's classes (sorted keys, shuffled by ``random.Random(seed)``, the first
``int(len * fraction)``) as *unseen*; a run that excludes them from training
(``train seq2seq --semvec-exclude DIR/unseen/*``) is then scored on them.

:func:`write_class_split` writes ``DIR/unseen/<set>-validationset.json.gz`` and
``DIR/seen/<set>-validationset.json.gz`` (the same JSON objects, a subset of classes each), so
``eval score-k DIR/unseen/*`` and ``eval retrieval --task equivalence --semvec DIR/unseen`` read
them as they read the shared splits.

Example::

    paths = write_class_split(["../shared/data/semvec/poly8-validationset.json.gz"], "splits")
    # [Path("splits/unseen/poly8-validationset.json.gz"), Path("splits/seen/...")]
"""

from __future__ import annotations

import gzip
import json
import logging
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.semvec import read_semvec_raw

logger = logging.getLogger(__name__)

__all__ = ["CLASS_SPLIT_PARTS", "split_classes", "write_class_split"]

#: The two sub-folders :func:`write_class_split` writes.
CLASS_SPLIT_PARTS = ("unseen", "seen")


def split_classes(
    classes: dict[str, Any], fraction: float = 0.5, seed: int = 0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(unseen, seen)``: the classes of one SemVec set object, ``fraction`` of them unseen.

    Args:
        classes: a SemVec set's JSON object (canonical form -> ``{"Original", "Noise"}``).
        fraction: the unseen share, in (0, 1).
        seed: the shuffle's seed; the same seed and keys give the same split.

    Raises:
        IndexerError: ``fraction`` outside (0, 1).
    """
    if not 0 < fraction < 1:
        raise IndexerError(f"the unseen fraction must be in (0, 1), not {fraction}")
    keys = sorted(classes)
    random.Random(seed).shuffle(keys)
    cut = int(len(keys) * fraction)
    unseen = {key: classes[key] for key in keys[:cut]}
    seen = {key: classes[key] for key in keys[cut:]}
    return unseen, seen


def write_class_split(
    paths: Iterable[str | Path], out: str | Path, fraction: float = 0.5, seed: int = 0
) -> list[Path]:
    """Split each SemVec file of ``paths`` and write both parts under ``out``; returns the files.

    Raises:
        IndexerError: a bad ``fraction``; ExtractionError (a subclass) for an unreadable set.
    """
    out = Path(out)
    written: list[Path] = []
    for path in paths:
        unseen, seen = split_classes(read_semvec_raw(path), fraction, seed)
        for part, data in zip(CLASS_SPLIT_PARTS, (unseen, seen), strict=True):
            target = out / part / Path(path).name
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            with gzip.open(tmp, "wt", encoding="utf-8") as handle:
                json.dump(data, handle)
            tmp.replace(target)
            written.append(target)
        logger.info("%s: %d classes unseen, %d seen", Path(path).name, len(unseen), len(seen))
    return written
