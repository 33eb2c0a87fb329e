"""ExpEmb: GRU encoder-decoder with additive attention over prefix tokens (expemb seed, appendix A).

Encoder (eq. 2): token ids ``x_1 .. x_N`` -> embeddings ``e_i`` -> one GRU layer
``h_i = GRU(e_i, h_{i-1})``; the last hidden state ``h_N`` is the expression's *embedding*
(section 3, Figure 1). Decoder: initial state ``s_0 = h_N``; at step ``t``

* additive attention (eq. 3, Bahdanau et al. 2015):
  ``a_{i,t} = v_a^T tanh(W_a s_{t-1} + U_a h_i)``, ``c_t = sum_i softmax_i(a_{i,t}) h_i``
  (:func:`additive_attention`, padding masked out);
* ``d_t = W_c [c_t, o_{t-1}]`` (eq. 4; ``o_{t-1}`` the embedding of the previous token,
  the gold one under teacher forcing);
* ``s_t = GRU(d_t, s_{t-1})`` (eq. 2), ``P(y_t | y_<t, x) = softmax(W_o s_t)`` (eq. 5).

Loss (eq. 7): ``l(x, y) = - sum_t log P(y_t | y_<t, x)`` (:func:`sequence_nll`), averaged over
the batch. Dimensions (Table 10): embedding and GRU sizes are both the model dimension ``H``.

Defaults (:class:`ExpEmbConfig`) are the seed's EXPEMB-E setting: ``H = 1024``, one GRU layer,
AdamW with learning rate ``1e-4``, batch 64, at most 512 tokens (appendix E); EXPEMB-A used
``H = 128``. The shipped CPU model is smaller (see docs/encoder-seq2seq.md).

Example::

    model = ExpEmb(ExpEmbConfig(vocab_size=40, hidden=32))
    src = torch.tensor([[5, 6, 7, 0]]); lengths = torch.tensor([3])
    emb = model.embed(src, lengths)                      # (1, 32)
    logits = model(src, lengths, torch.tensor([[1, 5, 6, 7]]))   # (1, 4, 40)
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import nn

logger = logging.getLogger(__name__)

__all__ = [
    "ExpEmb",
    "ExpEmbConfig",
    "ExpEmbConfigError",
    "additive_attention",
    "last_hidden",
    "sequence_nll",
]

#: Vocabulary ids every ExpEmb vocabulary reserves (:mod:`mathsearch.encoders.seq2seq_data`).
PAD, SOE, EOE, UNK = 0, 1, 2, 3


class ExpEmbConfigError(ValueError):
    """An ExpEmb configuration that cannot build a model."""


@dataclass(frozen=True)
class ExpEmbConfig:
    """Model and optimisation settings (defaults: the seed's EXPEMB-E, appendix E).

    Args:
        vocab_size: tokens including the 4 reserved ids (pad, SOE, EOE, unknown).
        hidden: model dimension ``H`` (embedding size = GRU size = output dimension); 1024.
        layers: GRU layers of encoder and decoder (the seed: 1).
        lr: AdamW learning rate (1e-4); batch_size 64; max_len 512 tokens per expression.
        beam_sizes: beam sizes of the generation evaluation (1, 10, 50).
        mode: ``equivalent`` (EXPEMB-E) or ``autoencoder`` (EXPEMB-A).
    """

    vocab_size: int
    hidden: int = 1024
    layers: int = 1
    lr: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 64
    max_len: int = 512
    epochs: int = 20
    beam_sizes: tuple[int, ...] = (1, 10, 50)
    mode: str = "equivalent"

    def __post_init__(self) -> None:
        if self.vocab_size < 5 or self.hidden < 1 or self.layers < 1 or self.max_len < 2:
            raise ExpEmbConfigError(f"bad ExpEmb sizes: {self}")
        if self.mode not in ("equivalent", "autoencoder"):
            raise ExpEmbConfigError(f"mode must be equivalent or autoencoder, not {self.mode!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["beam_sizes"] = list(self.beam_sizes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExpEmbConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "beam_sizes" in values:
            values["beam_sizes"] = tuple(values["beam_sizes"])
        return cls(**values)


def last_hidden(outputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``h_N`` of each sequence: ``outputs[b, lengths[b] - 1]`` of a right-padded batch.

    A unidirectional GRU's output at ``N - 1`` does not depend on the padding after it, so this
    equals the packed-sequence final state and exports to ONNX as a gather.

    Args:
        outputs: ``(B, S, H)`` GRU outputs (top layer); lengths: ``(B,)`` int64, ``>= 1``.
    Returns:
        ``(B, H)``.
    """
    index = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, outputs.size(2))
    return outputs.gather(1, index).squeeze(1)


def additive_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    mask: torch.Tensor,
    *,
    w_a: nn.Linear,
    u_a: nn.Linear,
    v_a: nn.Linear,
    projected: torch.Tensor | None = None,
) -> torch.Tensor:
    """Eq. 3: ``c_t = sum_i softmax_i(v_a^T tanh(W_a s_{t-1} + U_a h_i)) h_i``.

    Args:
        query: ``s_{t-1}``, ``(B, H)``; keys: ``h_i``, ``(B, S, H)``; mask: ``(B, S)`` bool,
            True on real tokens; projected: ``U_a h_i`` when already computed (it does not
            change over decoder steps).
    Returns:
        the context ``c_t``, ``(B, H)``.
    """
    projected = u_a(keys) if projected is None else projected
    scores = v_a(torch.tanh(w_a(query).unsqueeze(1) + projected)).squeeze(2)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=1)
    return torch.bmm(weights.unsqueeze(1), keys).squeeze(1)


def sequence_nll(logits: torch.Tensor, target: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """Eq. 7 per example: ``-sum_t log softmax(logits_t)[y_t]`` over non-pad targets.

    Args:
        logits: ``(B, T, V)``; target: ``(B, T)`` ids (``pad`` where the sequence has ended).
    Returns:
        ``(B,)`` negative log-likelihoods.
    """
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(2, target.unsqueeze(2)).squeeze(2)
    return -(picked * (target != pad)).sum(dim=1)


class ExpEmb(nn.Module):
    """The seq2seq model of Figure 2 / appendix A (see the module docstring)."""

    def __init__(self, config: ExpEmbConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.src_embedding = nn.Embedding(config.vocab_size, h, padding_idx=PAD)
        self.encoder = nn.GRU(h, h, num_layers=config.layers, batch_first=True)
        self.tgt_embedding = nn.Embedding(config.vocab_size, h, padding_idx=PAD)
        self.w_a = nn.Linear(h, h, bias=False)
        self.u_a = nn.Linear(h, h, bias=False)
        self.v_a = nn.Linear(h, 1, bias=False)
        self.w_c = nn.Linear(2 * h, h)
        self.decoder = nn.ModuleList(
            [nn.GRUCell(h, h) for _ in range(config.layers)]
        )  # stepwise: attention needs s_{t-1}
        self.w_o = nn.Linear(h, config.vocab_size)

    def encode(self, src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder states ``(B, S, H)`` and per-layer final states ``(L, B, H)``."""
        outputs, _ = self.encoder(self.src_embedding(src))
        if self.config.layers == 1:
            return outputs, last_hidden(outputs, lengths).unsqueeze(0)
        # deeper encoders: the final state of every layer from a packed run
        packed = nn.utils.rnn.pack_padded_sequence(
            self.src_embedding(src), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, state = self.encoder(packed)
        return outputs, state

    def embed(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The embedding ``h_N`` (top layer), ``(B, H)``: what the ONNX export computes."""
        outputs, _ = self.encoder(self.src_embedding(src))
        return last_hidden(outputs, lengths)

    def decode_step(
        self,
        token: torch.Tensor,
        state: torch.Tensor,
        keys: torch.Tensor,
        mask: torch.Tensor,
        projected: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step: previous tokens ``(B,)``, states ``(L, B, H)`` -> logits
        ``(B, V)`` and the new states (``projected``: ``U_a keys``, see
        :func:`additive_attention`)."""
        context = additive_attention(
            state[-1], keys, mask, w_a=self.w_a, u_a=self.u_a, v_a=self.v_a, projected=projected
        )
        x = self.w_c(torch.cat([context, self.tgt_embedding(token)], dim=1))
        new = []
        for layer, cell in enumerate(self.decoder):
            x = cell(x, state[layer])
            new.append(x)
        return self.w_o(x), torch.stack(new)

    def forward(
        self, src: torch.Tensor, lengths: torch.Tensor, tgt_in: torch.Tensor
    ) -> torch.Tensor:
        """Teacher-forced logits ``(B, T, V)`` for decoder inputs ``tgt_in`` (SOE + y_<T)."""
        keys, state = self.encode(src, lengths)
        mask = src != PAD
        projected = self.u_a(keys)
        steps = []
        for t in range(tgt_in.size(1)):
            logits, state = self.decode_step(tgt_in[:, t], state, keys, mask, projected)
            steps.append(logits)
        return torch.stack(steps, dim=1)

    def loss(
        self, src: torch.Tensor, lengths: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
    ) -> torch.Tensor:
        """Mean over the batch of eq. 7."""
        return sequence_nll(self(src, lengths, tgt_in), tgt_out).mean()
