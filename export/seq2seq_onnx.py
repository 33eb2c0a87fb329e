"""ONNX export of the ExpEmb *encoder* (expemb seed: the embedding is the encoder's ``h_N``).

The exported graph takes ``tokens`` (``B x S`` int64 ids, right-padded with 0) and ``lengths``
(``B`` int64, >= 1) and returns ``embedding`` (``B x H`` float32): embedding layer, the GRU
(ONNX ``GRU``), and a gather of the output at ``lengths - 1``
(:func:`mathsearch.encoders.seq2seq.last_hidden`).
The decoder is not exported: search needs only the vector.

:func:`export_seq2seq` writes ``MODEL.onnx``, ``MODEL.vocab.json`` (the token vocabulary, whose
hash is the card's ``vocab_hash``) and ``MODEL.card.json`` after :func:`check_seq2seq_parity`
(ONNX Runtime vs PyTorch eval mode on real prefix sequences, batches of mixed lengths).
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from mathsearch.encoders.seq2seq import ExpEmb
from mathsearch.encoders.seq2seq_data import TokenVocabulary, pad_ids
from mathsearch.export.errors import ParityError
from mathsearch.export.onnx_file import IR_VERSION, OPSET, software_versions, write_onnx
from mathsearch.runtime.gcn_session import open_session
from mathsearch.runtime.model_card import ModelCard, beside, file_sha256

logger = logging.getLogger(__name__)

__all__ = [
    "INPUT_NAMES",
    "OUTPUT_NAME",
    "Seq2SeqParity",
    "check_seq2seq_parity",
    "export_encoder_onnx",
    "export_seq2seq",
    "vocab_path",
]

INPUT_NAMES = ("tokens", "lengths")
OUTPUT_NAME = "embedding"
_DYNAMIC = {"tokens": {0: "B", 1: "S"}, "lengths": {0: "B"}, "embedding": {0: "B"}}


def vocab_path(model_path: str | os.PathLike[str]) -> Path:
    """``MODEL.onnx`` -> ``MODEL.vocab.json`` (same folder)."""
    return beside(model_path, ".vocab.json")


class EncoderOnnxModule(nn.Module):
    """``(tokens, lengths) -> h_N`` of a trained :class:`ExpEmb`; with ``l2``,
    ``h_N / ||h_N||_2`` (unit vectors: dot product = cosine)."""

    def __init__(self, model: ExpEmb, l2: bool = False) -> None:
        super().__init__()
        self.model = model
        self.l2 = l2

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h = self.model.embed(tokens, lengths)
        return nn.functional.normalize(h, dim=1, eps=1e-12) if self.l2 else h


def export_encoder_onnx(model: ExpEmb, path: str | os.PathLike[str], *, l2: bool = False) -> Path:
    """Write the encoder of ``model`` (a CPU copy, eval mode) as ONNX; returns the path.

    Raises:
        ExportError: the exporter or the ONNX checker failed.
    """
    module = EncoderOnnxModule(copy.deepcopy(model).cpu(), l2=l2).eval()
    example = (torch.tensor([[4, 5, 6], [7, 8, 0]]), torch.tensor([3, 2]))
    return write_onnx(
        module,
        example,
        path,
        input_names=INPUT_NAMES,
        output_name=OUTPUT_NAME,
        dynamic_axes=_DYNAMIC,
        what="seq2seq encoder",
    )


@dataclass(frozen=True)
class Seq2SeqParity:
    """How far ONNX Runtime's embeddings are from PyTorch's on real sequences."""

    sequences: int
    batches: int
    max_abs_diff: float
    mean_abs_diff: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def check_seq2seq_parity(
    model: ExpEmb,
    vocab: TokenVocabulary,
    onnx_path: str | os.PathLike[str],
    sequences: Sequence[Sequence[str]],
    *,
    tolerance: float = 1e-4,
    batch_size: int = 64,
    raise_on_failure: bool = True,
    l2: bool = False,
) -> Seq2SeqParity:
    """Compare ONNX Runtime (CPU) and PyTorch eval mode on ``sequences`` (prefix tokens).

    Raises:
        ParityError: no sequences, or (with ``raise_on_failure``) a difference over
            ``tolerance``.
    """
    if not sequences:
        raise ParityError("the parity check needs at least one sequence")
    session = open_session(onnx_path, device="cpu")
    model = model.cpu().eval()
    reference = EncoderOnnxModule(model, l2=l2).eval()
    worst, total, count, batches = 0.0, 0.0, 0, 0
    with torch.no_grad():
        for start in range(0, len(sequences), batch_size):
            chunk = sequences[start : start + batch_size]
            ids = [vocab.encode(s[: model.config.max_len]) for s in chunk]
            src, lengths = pad_ids(ids)
            expected = reference(src, lengths).numpy().astype(np.float64)
            (got,) = session.run([OUTPUT_NAME], {"tokens": src.numpy(), "lengths": lengths.numpy()})
            diff = np.abs(np.asarray(got, dtype=np.float64) - expected)
            worst = max(worst, float(diff.max()))
            total += float(diff.sum())
            count += diff.size
            batches += 1
    report = Seq2SeqParity(len(sequences), batches, worst, total / max(count, 1), tolerance)
    if raise_on_failure and not report.passed:
        raise ParityError(f"max |onnx - torch| {worst:.3g} > tolerance {tolerance:g}")
    return report


def export_seq2seq(
    model: ExpEmb,
    vocab: TokenVocabulary,
    out: str | os.PathLike[str],
    parity_sequences: Sequence[Sequence[str]],
    *,
    name: str | None = None,
    version: int = 1,
    tolerance: float = 1e-4,
    training: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    parity_data: str = "",
    l2: bool = False,
) -> tuple[ModelCard, Seq2SeqParity]:
    """Export, check parity, write the vocabulary and the card beside ``out``; with ``l2`` the
    model outputs unit vectors (``h_N / ||h_N||``).

    Raises:
        ExportError: the export failed; ParityError: the parity check failed.
    """
    out = Path(out)
    export_encoder_onnx(model, out, l2=l2)
    parity = check_seq2seq_parity(model, vocab, out, parity_sequences, tolerance=tolerance, l2=l2)
    vocab.save(vocab_path(out))
    hidden = model.config.hidden
    card = ModelCard(
        name=name or f"seq2seq-v{version}",
        family="seq2seq",
        version=version,
        embedding_dim=hidden,
        similarity="cosine",
        vocab_hash=vocab.hash,
        vocab_sizes=[len(vocab)],
        opset=OPSET,
        ir_version=IR_VERSION,
        inputs=[
            {"name": "tokens", "dtype": "int64", "shape": ["B", "S"]},
            {"name": "lengths", "dtype": "int64", "shape": ["B"]},
        ],
        outputs=[{"name": OUTPUT_NAME, "dtype": "float32", "shape": ["B", hidden]}],
        sha256=file_sha256(out),
        training={**(training or {}), "model_config": model.config.to_dict()},
        metrics=metrics or {},
        parity={**parity.to_dict(), "data": parity_data},
        created=datetime.now(UTC).replace(microsecond=0).isoformat(),
        software=software_versions(),
        description=(
            "ExpEmb encoder (expemb seed, appendix A): embedding + one GRU layer over SymPy "
            f"prefix tokens, H={hidden}; the embedding is the last hidden state h_N"
            f"{' divided by its L2 norm' if l2 else ''}; trained "
            f"as {'EXPEMB-A (autoencoder)' if model.config.mode == 'autoencoder' else 'EXPEMB-E'} "
            "with a GRU decoder with additive attention (not exported)."
        ),
    )
    card.write(out)
    logger.info("exported the seq2seq encoder to %s", out)
    return card, parity
