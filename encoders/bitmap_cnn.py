r"""The equation encoder of the ECML 2019 seed: a CNN over 333x32 equation bitmaps (sec. 4.1).

:math:`f(x): \mathbb{R}^{333 \times 32} \to \mathbb{R}^{64}`, compared by dot product
:math:`s(x_1, x_2) = \langle \bar f(x_1), \bar f(x_2) \rangle` of the normalised output
:math:`\bar f(x) = f(x) / (\lVert f(x) \rVert_2 + \epsilon)`, :math:`\epsilon = 10^{-5}`
(sec. 4.2, "Margin losses require ..."; sec. 4.3). All non-linearities are ReLUs.

The seed gives the layer counts and the parameter totals; kernel sizes, pooling and the flattened
width are worked out so that both totals hold exactly for a ``(1, 32, 333)`` input (they match
the authors' code, github.com/Whadup/EquationLearning ``src/equation_encoder.py``; valid
convolutions, biases everywhere)::

  small (45,504)  "three convolution layers with 32 channels, each followed by a MaxPooling
                   layer, followed by a final fully connected linear layer"
    conv 1->32  3x3        32x333 -> 30x331   1*32*9  + 32 =    320
    maxpool (2,4)                 -> 15x82
    conv 32->32 5x5               -> 11x78    32*32*25 + 32 = 25,632
    maxpool (2,4)                 ->  5x19
    conv 32->32 3x3               ->  3x17    32*32*9 + 32  =  9,248
    maxpool (3,3)                 ->  1x5     flatten 32*1*5 = 160
    linear 160->64                            160*64 + 64   = 10,304   total 45,504

  large (255,040) "6 convolution layers with 64 channels each, every other layer followed by a
                   MaxPooling layer ... two fully connected layers", batch norm between them
    conv 1->64 3x3, conv 64->64 3x3       32x333 -> 28x329       640 + 36,928 = 37,568
    maxpool (2,4)                                -> 14x82
    conv 64->64 3x5, conv 64->64 3x5             -> 10x74    61,504 + 61,504 = 123,008
    maxpool (2,4)                                ->  5x18
    conv 64->64 3x3, conv 64->64 3x3             ->  1x14    36,928 + 36,928 = 73,856
    maxpool (1,3)                                ->  1x4     flatten 64*1*4 = 256
    linear 256->64                                           256*64 + 64 = 16,448
    batch norm 64 (no affine parameters)                                    0
    linear 64->64                                            64*64 + 64 =  4,160
                                                                    total 255,040

A ReLU follows every convolution. The seed names no non-linearity between the two fully
connected layers of the large net and the authors' code has none, so there is none here either.
The batch norm is "frozen in later epochs": :meth:`BitmapCNN.freeze_batch_norm` puts it in eval
mode for good (running statistics only, no more updates; it has no parameters), which is what
the export uses too. Initialisation (sec. 4.3): conv filters and linear weights uniform in
:math:`(-k^{-1/2}, k^{-1/2})` with ``k`` weights per filter / ``m`` inputs - PyTorch's default
bound for the biases, and :func:`init_seed_uniform` for the weights.

The network takes the grey crop as float32 ``(B, 1, 32, 333)`` with 255 = paper (what
:func:`mathsearch.indexer.bitmap.centre_crop` gives) and turns it into ink coverage ``(255 - x) /
255``
first, as the authors fed the image's alpha channel.

Example:
    >>> import torch
    >>> model = BitmapCNN(BitmapCNNConfig(net="small"))
    >>> model.num_parameters()
    45504
    >>> out = model(torch.full((2, 1, 32, 333), 255.0))
    >>> tuple(out.shape)
    (2, 64)
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

__all__ = [
    "EPS",
    "NETS",
    "PARAMETERS",
    "BitmapCNN",
    "BitmapCNNConfig",
    "BitmapConfigError",
    "grey_to_ink",
    "init_seed_uniform",
    "l2_normalise",
]

NETS = ("small", "large")
#: The seed's parameter counts (sec. 4.1).
PARAMETERS = {"small": 45_504, "large": 255_040}
#: The normalisation constant of sec. 4.3.
EPS = 1e-5


class BitmapConfigError(ValueError):
    """An invalid bitmap-CNN configuration."""


@dataclass(frozen=True)
class BitmapCNNConfig:
    """Architecture choice and input size.

    Args:
        net: ``"small"`` (default) or ``"large"``.
        height: crop rows (32); width: crop columns (333).
        out_dim: embedding size d (64).
        eps: :math:`\\epsilon` of the normalisation (1e-5).
        out_norm: beyond the seed, a batch norm without parameters on :math:`f(x)` before the
            normalisation (False, the seed). It centres the embeddings: the seed's net starts
            with every crop on nearly one direction (mean pairwise cosine 0.97), which
            contrastive and teacher losses take hundreds of steps to undo; at export it is a
            fixed affine map (running statistics).
    """

    net: str = "small"
    height: int = 32
    width: int = 333
    out_dim: int = 64
    eps: float = EPS
    out_norm: bool = False

    def __post_init__(self) -> None:
        if self.net not in NETS:
            raise BitmapConfigError(f"net must be one of {NETS}, not {self.net!r}")
        if self.height < 1 or self.width < 1 or self.out_dim < 1 or self.eps <= 0:
            raise BitmapConfigError("height, width, out_dim and eps must be positive")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BitmapCNNConfig:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def l2_normalise(x: Tensor, eps: float = EPS) -> Tensor:
    r""":math:`\bar f(x) = f(x) / (\lVert f(x) \rVert_2 + \epsilon)` row-wise (sec. 4.2).

    >>> float(l2_normalise(torch.tensor([[3.0, 4.0]]), eps=0.0).norm())
    1.0
    """
    return x / (torch.linalg.vector_norm(x, dim=-1, keepdim=True) + eps)


def grey_to_ink(x: Tensor) -> Tensor:
    """Grey levels (255 = paper) to ink coverage in [0, 1] (1 = ink)."""
    return (255.0 - x) * (1.0 / 255.0)


def init_seed_uniform(module: nn.Module) -> None:
    """Sec. 4.3: conv/linear weights uniform in (-k^-1/2, k^-1/2), k = fan-in; biases alike."""
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d | nn.Linear):
            fan_in = layer.weight[0].numel()
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(layer.weight, -bound, bound)
            if layer.bias is not None:
                nn.init.uniform_(layer.bias, -bound, bound)


def _small_features() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.MaxPool2d((2, 4)),
        nn.Conv2d(32, 32, 5),
        nn.ReLU(),
        nn.MaxPool2d((2, 4)),
        nn.Conv2d(32, 32, 3),
        nn.ReLU(),
        nn.MaxPool2d((3, 3)),
    )


def _large_features() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 64, 3),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d((2, 4)),
        nn.Conv2d(64, 64, (3, 5)),
        nn.ReLU(),
        nn.Conv2d(64, 64, (3, 5)),
        nn.ReLU(),
        nn.MaxPool2d((2, 4)),
        nn.Conv2d(64, 64, 3),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d((1, 3)),
    )


class BitmapCNN(nn.Module):
    """The small or large equation encoder (module docstring for the layers and counts).

    Args:
        config: :class:`BitmapCNNConfig` (default: small, 32x333 -> 64).

    Shapes: ``forward(x)``: float32 ``(B, 1, H, W)`` grey crops -> ``(B, out_dim)`` rows of
    L2 norm 1 (up to :math:`\\epsilon`).

    Raises:
        BitmapConfigError: an input size the pooling reduces to nothing.
    """

    def __init__(self, config: BitmapCNNConfig | None = None) -> None:
        super().__init__()
        self.config = config or BitmapCNNConfig()
        self.features = _small_features() if self.config.net == "small" else _large_features()
        try:
            with torch.no_grad():
                probe = self.features(torch.zeros(1, 1, self.config.height, self.config.width))
        except RuntimeError as exc:  # a kernel larger than what the pooling left
            raise BitmapConfigError(
                f"input {self.config.height}x{self.config.width} is too small: {exc}"
            ) from exc
        flat = probe.numel()
        if flat == 0:
            raise BitmapConfigError(f"input {self.config.height}x{self.config.width} is too small")
        self.flat_dim = flat
        self.fc = nn.Linear(flat, self.config.out_dim)
        if self.config.net == "large":
            self.batch_norm: nn.BatchNorm1d | None = nn.BatchNorm1d(
                self.config.out_dim, affine=False
            )
            self.fc2: nn.Linear | None = nn.Linear(self.config.out_dim, self.config.out_dim)
        else:
            self.batch_norm, self.fc2 = None, None
        self.out_norm: nn.BatchNorm1d | None = (
            nn.BatchNorm1d(self.config.out_dim, affine=False) if self.config.out_norm else None
        )
        self.batch_norm_frozen = False
        init_seed_uniform(self)

    def num_parameters(self) -> int:
        """Trainable parameters (45,504 small, 255,040 large at the seed's sizes)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def freeze_batch_norm(self) -> None:
        """Freeze the large net's batch norm for the rest of training (eval mode from now on)."""
        if self.batch_norm is not None:
            self.batch_norm.eval()
            for p in self.batch_norm.parameters():
                p.requires_grad_(False)
        self.batch_norm_frozen = True

    def train(self, mode: bool = True) -> BitmapCNN:
        super().train(mode)
        if self.batch_norm is not None and self.batch_norm_frozen:
            self.batch_norm.eval()
        return self

    def unnormalised(self, x: Tensor) -> Tensor:
        """:math:`f(x)` before the normalisation, ``(B, out_dim)``."""
        if x.dim() != 4 or x.shape[1] != 1:
            raise BitmapConfigError(f"expected (B, 1, H, W) crops, got {tuple(x.shape)}")
        h = self.features(grey_to_ink(x)).flatten(1)
        h = self.fc(h)
        if self.fc2 is not None and self.batch_norm is not None:
            h = self.fc2(self.batch_norm(h))
        if self.out_norm is not None:
            h = self.out_norm(h)
        return h

    def forward(self, x: Tensor) -> Tensor:
        """:math:`\\bar f(x)`: ``(B, 1, H, W)`` grey crops -> ``(B, out_dim)`` unit rows."""
        return l2_normalise(self.unnormalised(x), self.config.eps)

    def extra_repr(self) -> str:
        return f"net={self.config.net}, flat={self.flat_dim}, out={self.config.out_dim}"
