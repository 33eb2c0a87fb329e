"""The graph-convolutional equation encoder of the KDD 2020 seed, section 4.1.

Input: the 256-d one-hot node features ``x_j`` (section 3.2,
:func:`mathsearch.encoders.graph_data.one_hot`)
and each node's position ``p_j`` among its parent's children. With ``N(i)`` the neighbours of
node ``i`` (parent and children; edges in both directions):

* first layer, fixed sinusoid position embeddings ``E`` (Vaswani et al.) scaled by a learnable
  ``alpha`` initialised to 1, summed over the neighbourhood *including the node itself*::

      x_i^(1) = max(0, sum_{j in N(i) ∪ {i}} (W^(1) x_j + alpha E(p_j)) + b^(1))
      E(p)[2k] = sin(p / 10000^(2k/d)),  E(p)[2k+1] = cos(p / 10000^(2k/d)),  d = 512

* then 3 graph-convolution layers of width 512::

      x_i^(l) = max(0, sum_{j in N(i) ∪ {i}} W^(l) x_j^(l-1) + b^(l))

  with batch normalisation (over the nodes of the batch) before the first and the third of them;
  ``phi(x)`` (N, 512) is the output of the last one (:meth:`GraphCNN.node_states`, the input of
  the masking heads of section 4.2);
* mean over the nodes of each graph, then a linear layer to 64 dims (``pooling="gated"``, beyond
  the seed: a learned gate-weighted mean, :func:`gated_mean_pool`);
* soft normalisation (section 4.1, "a softer normalization inspired by batch normalization"): for
  a batch of embeddings ``e_1..e_B`` with norms ``n_b = ||e_b||_2``::

      mu = (1/B) sum_b n_b,   sigma = sqrt((1/B) sum_b (n_b - mu)^2)
      phi_bar(x_b) = e_b / (mu + sigma)

  in training with the batch's ``mu``/``sigma`` (gradients flow through them, as in batch norm)
  while updating running averages ``r <- (1 - m) r + m * batch_value`` (m = 0.1); in eval with
  the running averages (initialised to mu = 1, sigma = 0, so an untrained model is unscaled).

The bias is added once per node after the neighbourhood sum (the bias does not depend on ``j``;
adding it per neighbour would scale it with the degree). Aggregation is ``h_i + sum_{(j -> i)}
h_j`` with one ``scatter_add`` over the edges, the graphs carrying no self loops.

ONNX: :meth:`GraphCNN.embed_tensors` is the export surface: dense ``x`` (N, 256) float,
``pos`` (N,), ``edge_index`` (2, E), ``batch_index`` (N,) and ``ptr`` (B + 1,) long; the number
of graphs is read from ``ptr``'s shape, never from a tensor value, and the only Python branches
are on ``self.training``. scatter_add needs ONNX opset >= 16 (ScatterElements with reduction).
The dict-style :meth:`forward` (a torch-geometric batch) validates ids with ``int(...)`` and is
not meant to be traced.

Example::

    model = GraphCNN(GCNConfig())
    batch = collate([featuriser.parse_latex(tex).graph for tex in latex_list])
    emb = model(batch)                  # (B, 64)
    phi = model.node_states(batch)      # (N, 512)
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric.data import Data

from mathsearch.encoders.graph_data import one_hot

logger = logging.getLogger(__name__)

__all__ = [
    "AUTOCAST_ROW_BUCKET",
    "NORMALISATIONS",
    "POOLINGS",
    "GCNConfig",
    "GCNConfigError",
    "GraphCNN",
    "SoftNormalisation",
    "SumGraphConv",
    "aggregate",
    "bucketed_linear",
    "gated_mean_pool",
    "l2_normalise",
    "mean_pool",
    "norm_stats",
    "sinusoid_table",
    "soft_normalise",
    "sum_aggregate",
    "tree_adjacency",
]


#: ``soft``: the seed's soft normalisation (section 4.1); ``l2``: unit vectors (cosine search).
NORMALISATIONS = ("soft", "l2")
#: ``mean``: the seed's mean over the nodes (section 4.1); ``gated``: a learned weighted mean
#: (:func:`gated_mean_pool`, beyond the seed).
POOLINGS = ("mean", "gated")


class GCNConfigError(ValueError):
    """A :class:`GCNConfig` with impossible values."""


@dataclass(frozen=True)
class GCNConfig:
    """Hyper-parameters of :class:`GraphCNN` (defaults: the seed's, section 4.1).

    Args:
        sizes: tag, attribute and character slots of the one-hot input (32, 32, 192).
        hidden: width of every graph layer (512).
        out_dim: embedding size after the last linear layer (64).
        layers: graph-convolution layers after the positional first layer (3).
        max_position: rows of the sinusoid table (positions are capped at 255).
        soft_norm_momentum: momentum of the soft normalisation's running averages.
        soft_norm_eps: lower bound of the divisor ``mu + sigma``.
        batch_norm_before: indices (0-based, into the ``layers`` graph-convolution layers) that
            get a BatchNorm1d in front: the first and the third.
        sinusoid_base: the 10000 of the sinusoid embeddings.
        normalisation: ``soft`` (the seed's, section 4.1) or ``l2`` (unit vectors, so the
            inner product is the cosine and OpenSearch's ``cosinesimil`` scores like training).
        pooling: ``mean`` (the seed's) or ``gated`` (:func:`gated_mean_pool`: each node weighted
            by a learned gate, so distinctive nodes can count more than common ones).
    """

    sizes: tuple[int, int, int] = (32, 32, 192)
    hidden: int = 512
    out_dim: int = 64
    layers: int = 3
    max_position: int = 256
    soft_norm_momentum: float = 0.1
    soft_norm_eps: float = 1e-6
    batch_norm_before: tuple[int, ...] = field(default=(0, 2))
    sinusoid_base: float = 10000.0
    normalisation: str = "soft"
    pooling: str = "mean"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        object.__setattr__(self, "batch_norm_before", tuple(int(i) for i in self.batch_norm_before))
        if len(self.sizes) != 3 or min(self.sizes) < 1:
            raise GCNConfigError(f"sizes must be three positive slot counts, not {self.sizes}")
        if min(self.hidden, self.out_dim, self.layers, self.max_position) < 1:
            raise GCNConfigError("hidden, out_dim, layers and max_position must be positive")
        if not 0.0 <= self.soft_norm_momentum <= 1.0:
            raise GCNConfigError(f"soft_norm_momentum {self.soft_norm_momentum} not in [0, 1]")
        if self.normalisation not in NORMALISATIONS:
            raise GCNConfigError(
                f"normalisation must be one of {NORMALISATIONS}, not {self.normalisation!r}"
            )
        if self.pooling not in POOLINGS:
            raise GCNConfigError(f"pooling must be one of {POOLINGS}, not {self.pooling!r}")
        if any(not 0 <= i < self.layers for i in self.batch_norm_before):
            raise GCNConfigError(f"batch_norm_before {self.batch_norm_before} not in [0, layers)")

    @property
    def in_dim(self) -> int:
        return sum(self.sizes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for checkpoints and model cards)."""
        data = asdict(self)
        data["sizes"] = list(self.sizes)
        data["batch_norm_before"] = list(self.batch_norm_before)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GCNConfig:
        try:
            return cls(**data)
        except TypeError as exc:
            raise GCNConfigError(f"bad GCN config: {exc}") from exc


# -- the pure math ----------------------------------------------------------------------------


def sinusoid_table(max_position: int, dim: int, base: float = 10000.0) -> Tensor:
    """Fixed position embeddings (Vaswani et al.), float32 ``(max_position, dim)``.

    ``E(p)[2k] = sin(p / base^(2k/dim))`` and ``E(p)[2k+1] = cos(p / base^(2k/dim))``; so
    ``E(0) = [0, 1, 0, 1, ...]``. Computed in float64, then cast.
    """
    if max_position < 1 or dim < 1:
        raise GCNConfigError("max_position and dim must be positive")
    positions = torch.arange(max_position, dtype=torch.float64).unsqueeze(1)
    even = torch.arange(0, dim, 2, dtype=torch.float64)
    angles = positions / base ** (even / dim)  # (P, ceil(dim / 2))
    table = torch.zeros(max_position, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table.to(torch.float32)


def sum_aggregate(h: Tensor, edge_index: Tensor) -> Tensor:
    """``out_i = h_i + sum_{(j -> i) in edges} h_j``: the sum over ``N(i) ∪ {i}``.

    Args:
        h: (N, F) node messages (already transformed).
        edge_index: (2, E) long, row 0 the source ``j``, row 1 the target ``i``.
    """
    source, target = edge_index[0], edge_index[1]
    # index_add adds whole rows (a segment sum); scatter_add over an expanded index would
    # address every one of the F elements of every message separately
    return h.index_add(0, target, h.index_select(0, source))


def tree_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``A + I`` as a coalesced sparse (N, N) float32 matrix: ``(A + I) @ h`` is
    :func:`sum_aggregate` ``(h, edge_index)`` as one sparse matmul (the training path; measured
    ~1.5x faster than the row-wise segment sum forward + backward at width 512).

    Args:
        edge_index: (2, E) long, row 0 the source ``j``, row 1 the target ``i``.
        num_nodes: N.
    """
    nodes = torch.arange(num_nodes, device=edge_index.device)
    rows = torch.cat((edge_index[1], nodes))
    cols = torch.cat((edge_index[0], nodes))
    values = torch.ones(rows.numel(), dtype=torch.float32, device=edge_index.device)
    indices = torch.stack((rows, cols))
    return torch.sparse_coo_tensor(indices, values, (num_nodes, num_nodes), check_invariants=False)


def aggregate(h: Tensor, edge_index: Tensor, adjacency: Tensor | None = None) -> Tensor:
    """:func:`sum_aggregate`, or ``adjacency @ h`` when the :func:`tree_adjacency` is given.

    Under autocast (``--amp``: bf16 on a CPU with AMX or AVX512-BF16, or CUDA) the row-wise
    segment sum is used: torch's sparse matmul mixes dtypes there and has no bf16 backward on CPU,
    and the segment sum is the faster of the two in bf16 (fwd + bwd at width 512 over 33k nodes:
    93 ms against 179 ms).
    """
    if adjacency is not None and not torch.is_autocast_enabled(h.device.type):
        return torch.sparse.mm(adjacency, h)
    return sum_aggregate(h, edge_index)


#: Under CPU autocast the rows of every node-matrix product are padded to a multiple of this
#: (:func:`bucketed_linear`).
AUTOCAST_ROW_BUCKET = 1024


def bucketed_linear(layer: nn.Module, x: Tensor) -> Tensor:
    """``layer(x)``; under CPU autocast with ``x``'s rows padded with zeros to a multiple of
    :data:`AUTOCAST_ROW_BUCKET` (and the padding cut off again).

    oneDNN builds (and keeps) a kernel for every new shape of a bf16 product: with a new node
    count every step, a training run grew by ~10 MB/s and ran slower than in float32 (measured:
    300 steps of a 128-wide layer, 1.7 -> 3.9 GB; padded to 1024 rows, flat at 0.8 GB). Padding
    costs at most 1,023 rows of a ~30k-40k-row batch.
    """
    n = x.size(0)
    autocast = x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
    if not autocast or n % AUTOCAST_ROW_BUCKET == 0:
        return layer(x)
    return layer(nn.functional.pad(x, (0, 0, 0, -n % AUTOCAST_ROW_BUCKET)))[:n]


def compute_dtype(t: Tensor) -> torch.dtype:
    """The dtype node states are computed in: autocast's (bf16 with ``--amp``) or ``t``'s own."""
    device = t.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else t.dtype


def mean_pool(h: Tensor, batch_index: Tensor, ptr: Tensor) -> Tensor:
    """Mean of the node rows of each graph, ``(B, F)`` with ``B = len(ptr) - 1``.

    Args:
        h: (N, F) node states.
        batch_index: (N,) long graph of each node (sorted, as torch-geometric builds it).
        ptr: (B + 1,) long node offsets; ``ptr[g + 1] - ptr[g]`` nodes belong to graph g.
    """
    sums = h.new_zeros((ptr.size(0) - 1, h.size(1))).index_add(0, batch_index, h)
    counts = (ptr[1:] - ptr[:-1]).clamp_min(1).to(h.dtype)
    return sums / counts.unsqueeze(1)


def gated_mean_pool(h: Tensor, gate: Tensor, batch_index: Tensor, ptr: Tensor) -> Tensor:
    """Gate-weighted mean of the node rows of each graph, ``(B, F)`` (beyond the seed).

    ``pool(G) = sum_{i in G} g_i h_i / sum_{i in G} g_i`` with ``g_i = sigmoid(<w, h_i> + c)``
    in (0, 1), computed by :class:`GraphCNN` from the node states. A constant gate gives
    :func:`mean_pool` (the gate starts at zero weights, so training starts from the seed's mean);
    a learned one can weigh distinctive nodes (a rare identifier) above common ones (``mrow``),
    as BM25's IDF does for terms.

    Args:
        h: (N, F) node states.
        gate: (N, 1) positive node weights ``g_i``.
        batch_index: (N,) long graph of each node.
        ptr: (B + 1,) long node offsets.

    Example::

        >>> h = torch.tensor([[1.0], [3.0], [5.0]])
        >>> gated_mean_pool(h, torch.tensor([[1.0], [3.0], [1.0]]), torch.tensor([0, 0, 1]),
        ...                 torch.tensor([0, 2, 3]))
        tensor([[2.5000],
                [5.0000]])
    """
    sums = h.new_zeros((ptr.size(0) - 1, h.size(1))).index_add(0, batch_index, gate * h)
    weights = gate.new_zeros((ptr.size(0) - 1, 1)).index_add(0, batch_index, gate)
    return sums / weights.clamp_min(1e-12)


def norm_stats(embeddings: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and (population) standard deviation of the L2 norms of ``(B, D)`` embeddings."""
    norms = torch.linalg.vector_norm(embeddings, dim=1)
    mean = norms.mean()
    std = ((norms - mean) ** 2).mean().sqrt()
    return mean, std


def l2_normalise(embeddings: Tensor, eps: float = 1e-12) -> Tensor:
    """``e_b / max(||e_b||_2, eps)``: unit vectors, inner product = cosine (``normalisation="l2"``).

    Written with elementary operations (no ``F.normalize``) so that the ONNX export is plain.
    """
    norms = (embeddings * embeddings).sum(dim=1, keepdim=True).sqrt()
    return embeddings / norms.clamp_min(eps)


def soft_normalise(embeddings: Tensor, mean: Tensor, std: Tensor, eps: float = 1e-6) -> Tensor:
    """``e_b / (mu + sigma)`` (section 4.1); the divisor is clamped to ``eps`` from below."""
    return embeddings / (mean + std).clamp_min(eps)


# -- modules ----------------------------------------------------------------------------------


class SoftNormalisation(nn.Module):
    """Divides embeddings by ``mu + sigma`` of their norms; batch stats in training, running ones
    in eval (see the module docstring). Buffers: ``running_mean`` (1.0), ``running_std`` (0.0),
    ``num_batches_tracked``.
    """

    running_mean: Tensor
    running_std: Tensor
    num_batches_tracked: Tensor

    def __init__(self, momentum: float = 0.1, eps: float = 1e-6) -> None:
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.register_buffer("running_mean", torch.tensor(1.0))
        self.register_buffer("running_std", torch.tensor(0.0))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, embeddings: Tensor) -> Tensor:
        if self.training:
            mean, std = norm_stats(embeddings)
            with torch.no_grad():
                m = self.momentum
                self.running_mean.mul_(1.0 - m).add_(m * mean.detach())
                self.running_std.mul_(1.0 - m).add_(m * std.detach())
                self.num_batches_tracked.add_(1)
            return soft_normalise(embeddings, mean, std, self.eps)
        return soft_normalise(embeddings, self.running_mean, self.running_std, self.eps)

    def extra_repr(self) -> str:
        return f"momentum={self.momentum}, eps={self.eps}"


class SumGraphConv(nn.Module):
    """``x_i' = max(0, sum_{j in N(i) ∪ {i}} (W x_j + t_j) + b)``; ``t`` an optional per-node term
    (the first layer's ``alpha E(p_j)``). ``W`` and ``b`` start like ``nn.Linear``'s.
    """

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim, bias=False)
        bound = 1.0 / math.sqrt(in_dim)
        self.bias = nn.Parameter(torch.empty(out_dim).uniform_(-bound, bound))

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        node_term: Tensor | None = None,
        adjacency: Tensor | None = None,
    ) -> Tensor:
        h = bucketed_linear(self.linear, x)
        if node_term is not None:
            h = h + node_term.to(h.dtype)
        # the bias in the messages' dtype: under autocast the states stay bf16 from layer to
        # layer instead of being promoted back to float32 (and cast down again by the next
        # product)
        return torch.relu(aggregate(h, edge_index, adjacency) + self.bias.to(h.dtype))


class GraphCNN(nn.Module):
    """Graph CNN of section 4.1: positional sum-conv, 3 x 512 sum-convs, mean, 64-d, soft norm.

    Args:
        config: hyper-parameters; ``GCNConfig()`` (the seed's) when None.

    Shapes: ``forward(batch)`` -> (B, out_dim); ``node_states(batch)`` -> (N, hidden).
    """

    position_table: Tensor

    def __init__(self, config: GCNConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or GCNConfig()
        self.input_layer = SumGraphConv(config.in_dim, config.hidden)
        self.alpha = nn.Parameter(torch.tensor(1.0))
        table = sinusoid_table(config.max_position, config.hidden, config.sinusoid_base)
        self.register_buffer("position_table", table, persistent=False)
        self.norms = nn.ModuleList(
            nn.BatchNorm1d(config.hidden) if i in config.batch_norm_before else nn.Identity()
            for i in range(config.layers)
        )
        self.convs = nn.ModuleList(
            SumGraphConv(config.hidden, config.hidden) for _ in range(config.layers)
        )
        self.project = nn.Linear(config.hidden, config.out_dim)
        self.gate: nn.Linear | None = None
        if config.pooling == "gated":
            self.gate = nn.Linear(config.hidden, 1)
            nn.init.zeros_(self.gate.weight)
            nn.init.zeros_(self.gate.bias)
        self.soft_norm = SoftNormalisation(config.soft_norm_momentum, config.soft_norm_eps)

    # -- tensor interface (the ONNX export surface) --------------------------------------------

    def node_states_tensors(self, x: Tensor, pos: Tensor, edge_index: Tensor) -> Tensor:
        """``phi(x)``: (N, hidden) from dense features (N, in_dim), positions and edges."""
        positions = pos.clamp(0, self.config.max_position - 1)
        h = self.input_layer(x, edge_index, self.alpha * self.position_table[positions])
        for norm, conv in zip(self.norms, self.convs, strict=True):
            h = conv(norm(h), edge_index)
        return h

    def embed_tensors(
        self, x: Tensor, pos: Tensor, edge_index: Tensor, batch_index: Tensor, ptr: Tensor
    ) -> Tensor:
        """Normalised embeddings ``phi_bar`` (B, out_dim); see the module docstring."""
        states = self.node_states_tensors(x, pos, edge_index)
        return self.normalise(self.project(self.pool(states, batch_index, ptr)))

    def pool(self, states: Tensor, batch_index: Tensor, ptr: Tensor) -> Tensor:
        """(B, hidden) float32 graph vectors: :func:`mean_pool`, or :func:`gated_mean_pool`
        (``gated``); bf16 states (``--amp``) are pooled in float32 (bf16 sums of ~100 rows lose
        digits)."""
        if self.gate is None:
            return mean_pool(states.float(), batch_index, ptr)
        gate = torch.sigmoid(bucketed_linear(self.gate, states).float())
        return gated_mean_pool(states.float(), gate, batch_index, ptr)

    def normalise(self, embeddings: Tensor) -> Tensor:
        """The configured output normalisation: soft (section 4.1) or L2."""
        if self.config.normalisation == "l2":
            return l2_normalise(embeddings)
        return self.soft_norm(embeddings)

    # -- id interface (training on packed batches) ----------------------------------------------

    def input_rows(self, tag: Tensor, attr: Tensor, char: Tensor) -> Tensor:
        """``W^(1) x_j`` for the one-hot ``x_j`` of ids (N,) each: three rows of ``[W^(1)T; 0]``.

        The same sums as ``input_layer.linear(one_hot_ids(tag, attr, char))`` (id -1, "none",
        picks the zero row) without building the (N, 256) one-hot matrix; gradients reach
        ``W^(1)`` through the lookup.
        """
        weight = self.input_layer.linear.weight  # (hidden, in_dim)
        table = torch.cat((weight.t(), weight.new_zeros(1, weight.size(0))))
        none = self.config.in_dim
        tag_size, attr_size, _ = self.config.sizes

        def part(ids: Tensor, offset: int) -> Tensor:
            index = torch.where(ids >= 0, ids + offset, torch.full_like(ids, none))
            return table.index_select(0, index)

        return part(tag, 0) + part(attr, tag_size) + part(char, tag_size + attr_size)

    def forward_ids(  # noqa: PLR0917 - the packed batch's tensors, as embed_tensors takes them
        self,
        tag: Tensor,
        attr: Tensor,
        char: Tensor,
        pos: Tensor,
        edge_index: Tensor,
        batch_index: Tensor,
        ptr: Tensor,
        adjacency: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Embeddings (B, out_dim) and node states (N, hidden) from node ids, in one pass.

        Equal to :meth:`forward_with_states` on the same graphs (same parameters), but the first
        layer is a lookup (:meth:`input_rows`) instead of a product with one-hot rows, and with
        ``adjacency`` (:func:`tree_adjacency` of ``edge_index``) every neighbourhood sum is one
        sparse matmul.
        """
        positions = pos.clamp(0, self.config.max_position - 1)
        first = self.input_rows(tag, attr, char) + self.alpha * self.position_table[positions]
        dtype = compute_dtype(first)
        bias = self.input_layer.bias.to(dtype)
        h = torch.relu(aggregate(first.to(dtype), edge_index, adjacency) + bias)
        for norm, conv in zip(self.norms, self.convs, strict=True):
            h = conv(norm(h), edge_index, adjacency=adjacency)
        # the projection's output back to float32 for the normalisation and the losses
        embeddings = self.normalise(self.project(self.pool(h, batch_index, ptr)).float())
        return embeddings, h

    # -- torch-geometric interface ----------------------------------------------------------

    def _inputs(self, batch: Data) -> tuple[Tensor, Tensor, Tensor]:
        x = one_hot(batch, self.config.sizes).to(self.alpha.device)
        return x, batch.pos.to(x.device), batch.edge_index.to(x.device)

    @staticmethod
    def _graph_index(batch: Data, num_nodes: int, device: torch.device) -> tuple[Tensor, Tensor]:
        batch_index = getattr(batch, "batch", None)
        ptr = getattr(batch, "ptr", None)
        if batch_index is None or ptr is None:  # a single Data object
            batch_index = torch.zeros(num_nodes, dtype=torch.long)
            ptr = torch.tensor([0, num_nodes], dtype=torch.long)
        return batch_index.to(device), ptr.to(device)

    def node_states(self, batch: Data) -> Tensor:
        """``phi(x)``, the last graph layer's node outputs (N, hidden), for the masking heads."""
        return self.node_states_tensors(*self._inputs(batch))

    def forward_with_states(self, batch: Data) -> tuple[Tensor, Tensor]:
        """Embeddings (B, out_dim) and node states (N, hidden) from one pass."""
        x, pos, edge_index = self._inputs(batch)
        states = self.node_states_tensors(x, pos, edge_index)
        batch_index, ptr = self._graph_index(batch, x.size(0), x.device)
        embeddings = self.normalise(self.project(self.pool(states, batch_index, ptr)))
        return embeddings, states

    def forward(self, batch: Data) -> Tensor:
        """Soft-normalised embeddings (B, out_dim) of a :class:`Batch` (or one :class:`Data`)."""
        return self.forward_with_states(batch)[0]
