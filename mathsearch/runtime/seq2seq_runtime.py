"""ONNX runtime of the ExpEmb seq2seq encoder: prefix tokens -> ``h_N`` (expemb seed).

:class:`Seq2SeqEmbedder` has the :class:`~mathsearch.runtime.embedders.Embedder` interface. For
every
item it
takes ``item["prefix"]`` (a list of tokens or one space-separated string) when present, else
computes it from ``item["latex"]`` with :func:`mathsearch.indexer.prefix.latex_to_prefix` under the
SymPy
time limit (the one featurisation, docs/architecture.md, rule 2). Items become
:class:`~mathsearch.runtime.embedders.EmbedRefusal` - never an exception - when:

* SymPy cannot read the LaTeX (``sympy-unparsable``, ``timeout``, ``too-large``: the
  :class:`~mathsearch.indexer.prefix.PrefixError` reason) or there is neither ``prefix`` nor
  ``latex``
  (``no-prefix``);
* the sequence is longer than the model's ``max_len`` (``too-long``);
* more than ``max_unknown`` (default 0.25) of its tokens are outside the model's vocabulary
  (``out-of-vocabulary``): the encoder would read mostly ``<unk>``.

The vocabulary is ``MODEL.vocab.json`` beside the model; its hash must equal the card's
``vocab_hash`` (else :class:`~mathsearch.runtime.errors.ModelMismatchError`). The card's similarity
is
``cosine``: vectors are returned as the network gives them (float32 ``(H,)``).

No torch here: onnxruntime + numpy (+ SymPy for LaTeX).

Example::

    embedder = Seq2SeqEmbedder("export/models/seq2seq-v2.onnx")
    embedder.embed([{"prefix": "+ x pow x 2"}, {"latex": r"\\sin(x)^2"}, {"latex": r"\\foo"}])
    # [array(...), array(...), EmbedRefusal(reason='sympy-unparsable', detail=...)]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.runtime.embedder_base import EmbedRefusal, OnnxEmbedder
from mathsearch.runtime.errors import ModelCardError, ModelMismatchError
from mathsearch.runtime.model_card import beside

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MAX_UNKNOWN",
    "Seq2SeqEmbedder",
    "load_vocab_tokens",
    "vocab_hash",
]

UNK, PAD = 3, 0
DEFAULT_MAX_UNKNOWN = 0.25
DEFAULT_BATCH = 256


def vocab_hash(tokens: Sequence[str]) -> str:
    """SHA-256 of a token list (same as
    :attr:`mathsearch.encoders.seq2seq_data.TokenVocabulary.hash`)."""
    text = json.dumps(list(tokens), ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_vocab_tokens(path: str | os.PathLike[str]) -> list[str]:
    """The tokens of a ``mathsearch-seq2seq-vocab/1`` file.

    Raises:
        ModelCardError: unreadable or of another format.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelCardError(f"cannot read the seq2seq vocabulary {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != "mathsearch-seq2seq-vocab/1":
        raise ModelCardError(f"{path} is not a seq2seq vocabulary")
    return [str(t) for t in data["tokens"]]


class Seq2SeqEmbedder(OnnxEmbedder):
    """The exported ExpEmb encoder behind the Embedder interface (module docstring).

    Args:
        path: ``MODEL.onnx`` with ``MODEL.card.json`` and ``MODEL.vocab.json`` beside it.
        device: ``auto``, ``cpu`` or ``cuda``; threads: ONNX Runtime intra-op threads.
        settings: optional object with ``sympy_timeout`` (seconds per LaTeX) and
            ``max_unknown`` (fraction); defaults: ``MATHSEARCH_SYMPY_TIMEOUT``, 0.25.

    Raises:
        ModelCardError: no card / vocabulary, or a card of another family.
        ModelMismatchError: the vocabulary's hash is not the card's.
    """

    FAMILY = "seq2seq"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str | None = None,
        threads: int | None = None,
        settings: Any = None,
    ) -> None:
        self._load_card(path)
        tokens = load_vocab_tokens(beside(self.path, ".vocab.json"))
        if vocab_hash(tokens) != self.card.vocab_hash:
            raise ModelMismatchError(
                f"{self.path.name}: the vocabulary beside it does not match the card's vocab_hash"
            )
        self.index = {token: n for n, token in enumerate(tokens)}
        config = (self.card.training or {}).get("model_config") or {}
        self.max_len = int(config.get("max_len", 512))
        self.max_unknown = float(getattr(settings, "max_unknown", DEFAULT_MAX_UNKNOWN))
        self.sympy_timeout = getattr(settings, "sympy_timeout", None)
        self._open_session(device, threads)

    def prefix_of(self, item: Mapping[str, Any]) -> list[str] | EmbedRefusal:
        """The item's prefix tokens, or why it has none."""
        prefix = item.get("prefix") if isinstance(item, Mapping) else None
        if isinstance(prefix, str):
            prefix = prefix.split()
        if isinstance(prefix, (list, tuple)) and prefix and all(isinstance(t, str) for t in prefix):
            return list(prefix)
        latex = item.get("latex") if isinstance(item, Mapping) else None
        if not isinstance(latex, str) or not latex.strip():
            return EmbedRefusal("no-prefix", "the item has neither prefix tokens nor LaTeX")
        from mathsearch.indexer.errors import IndexerError
        from mathsearch.indexer.prefix import latex_to_prefix

        try:
            return latex_to_prefix(latex, self.sympy_timeout)
        except IndexerError as exc:
            return EmbedRefusal(getattr(exc, "reason", "sympy-unparsable"), str(exc)[:200])
        except Exception as exc:  # SymPy / the time limit fail in many ways
            return EmbedRefusal("sympy-unparsable", f"{type(exc).__name__}: {exc}"[:200])

    def ids_of(self, tokens: Sequence[str]) -> list[int] | EmbedRefusal:
        """Token ids, or a refusal (too long, too many unknown tokens)."""
        if len(tokens) > self.max_len:
            return EmbedRefusal("too-long", f"{len(tokens)} tokens > {self.max_len}")
        ids = [self.index.get(token, UNK) for token in tokens]
        unknown = [t for t in tokens if t not in self.index]
        if len(unknown) > self.max_unknown * len(tokens):
            shown = " ".join(dict.fromkeys(unknown))[:120]
            return EmbedRefusal(
                "out-of-vocabulary", f"{len(unknown)} of {len(tokens)} tokens unknown: {shown}"
            )
        return ids

    def encode_ids(self, sequences: Sequence[Sequence[int]]) -> np.ndarray:
        """Embeddings ``(n, H)`` of id sequences (batched, right-padded)."""
        out = np.zeros((len(sequences), self.dim), dtype=np.float32)
        for start in range(0, len(sequences), DEFAULT_BATCH):
            chunk = sequences[start : start + DEFAULT_BATCH]
            width = max(len(s) for s in chunk)
            tokens = np.full((len(chunk), width), PAD, dtype=np.int64)
            for row, seq in enumerate(chunk):
                tokens[row, : len(seq)] = seq
            lengths = np.array([len(s) for s in chunk], dtype=np.int64)
            (got,) = self.session.run(None, {"tokens": tokens, "lengths": lengths})
            out[start : start + len(chunk)] = got
        return out

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        out: list[np.ndarray | EmbedRefusal] = []
        ready: list[list[int]] = []
        where: list[int] = []
        for n, item in enumerate(items):
            tokens = self.prefix_of(item)
            ids = tokens if isinstance(tokens, EmbedRefusal) else self.ids_of(tokens)
            out.append(ids if isinstance(ids, EmbedRefusal) else EmbedRefusal("pending"))
            if not isinstance(ids, EmbedRefusal):
                ready.append(ids)
                where.append(n)
        if not ready:
            return out
        try:
            vectors = self.encode_ids(ready)
            for n, vector in zip(where, vectors, strict=True):
                out[n] = vector
            return out
        except Exception:  # one bad sequence must not sink the batch: find it
            logger.warning("batch of %d failed to embed; embedding one by one", len(ready))
        for n, ids in zip(where, ready, strict=True):
            try:
                out[n] = self.encode_ids([ids])[0]
            except Exception as exc:
                out[n] = EmbedRefusal("encoder-error", f"{type(exc).__name__}: {exc}")
        return out
