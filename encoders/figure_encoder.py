"""The figure encoder of the figure-embeddings seed (section 3): text LSTM + image CNN + fusion.

* Text model ("LSTM"): a word embedding learned from scratch (100-d, vocabulary 1000 + 2) and
  one LSTM layer of 50 units; the last hidden state (at the text's length) is the 50-d text
  feature.
* Image model ("CNN"): two 3x3 convolutions of 32 filters (ReLU), a max-pooling layer, dropout
  0.5, a dense layer of 100 with ReLU and a final dense layer of 50.
* Fusion: the two feature vectors concatenated, batch normalisation, one dense layer -> the
  50-d figure embedding; two figures are compared by the dot product ``f_i . f_j``.

A figure without text or without image has that feature vector set to zero
(:func:`masked_concat`), so a missing image is "zero image + ``has_image = 0``" without the
CNN's biases leaking in.

Sizes follow the seed (section 5.1) except the image: the seed's 224 x 224 x 3 input with a
2 x 2 pool gives a 387,200 x 100 dense layer (~155 MB); the shipped default reads 64 x 64 grey
images with a 4 x 4 pool (docs/encoder-figure.md).

Example::

    model = FigureEncoder(FigureEncoderConfig(vocab_size=1002))
    vectors = model(tokens, lengths, images, has_image)     # (B, 50)
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

__all__ = [
    "FigureConfigError",
    "FigureEncoder",
    "FigureEncoderConfig",
    "ImageCNN",
    "TextLSTM",
    "gather_last",
    "masked_concat",
]


class FigureConfigError(ValueError):
    """Sizes that do not make a network."""


@dataclass(frozen=True)
class FigureEncoderConfig:
    """Sizes (defaults: seed section 5.1, image per the module docstring)."""

    vocab_size: int
    word_dim: int = 100
    text_dim: int = 50
    image_size: int = 64
    channels: int = 1
    filters: int = 32
    kernel: int = 3
    pool: int = 4
    dense: int = 100
    image_dim: int = 50
    dropout: float = 0.5
    out_dim: int = 50

    def __post_init__(self) -> None:
        if self.vocab_size < 3 or min(self.word_dim, self.text_dim, self.out_dim) < 1:
            raise FigureConfigError("vocab_size >= 3 and positive sizes are needed")
        if self.pooled_side < 1:
            raise FigureConfigError(f"image_size {self.image_size} too small for the CNN")

    @property
    def pooled_side(self) -> int:
        return (self.image_size - 2 * (self.kernel - 1)) // self.pool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FigureEncoderConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def gather_last(outputs: Tensor, lengths: Tensor) -> Tensor:
    """The LSTM output at each sequence's last real step: ``outputs[b, max(len_b - 1, 0)]``.

    Args:
        outputs: float ``(B, T, H)``; lengths: int64 ``(B,)``.
    Returns:
        ``(B, H)``.

    >>> gather_last(torch.arange(6.0).view(1, 3, 2), torch.tensor([2])).tolist()
    [[2.0, 3.0]]
    """
    index = (lengths.clamp(min=1) - 1).view(-1, 1, 1).expand(-1, 1, outputs.shape[2])
    return outputs.gather(1, index).squeeze(1)


def masked_concat(text: Tensor, image: Tensor, has_text: Tensor, has_image: Tensor) -> Tensor:
    """``[text * has_text, image * has_image]``: the fusion input (seed: concatenation), with the
    features of a missing modality set to zero. Shapes ``(B, Dt)``, ``(B, Di)``, ``(B, 1)``."""
    return torch.cat([text * has_text, image * has_image], dim=1)


class TextLSTM(nn.Module):
    """Word embedding + one LSTM layer; the last hidden state is the feature (seed: "LSTM")."""

    def __init__(self, config: FigureEncoderConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(config.vocab_size, config.word_dim, padding_idx=0)
        self.lstm = nn.LSTM(config.word_dim, config.text_dim, batch_first=True)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """tokens int64 ``(B, T)`` right-padded, lengths ``(B,)`` -> ``(B, text_dim)``."""
        outputs, _ = self.lstm(self.embedding(tokens))
        return gather_last(outputs, lengths)


class ImageCNN(nn.Module):
    """Two convolutions, max pooling, dropout, dense + ReLU, dense (seed: "CNN")."""

    def __init__(self, config: FigureEncoderConfig) -> None:
        super().__init__()
        side = config.pooled_side
        self.features = nn.Sequential(
            nn.Conv2d(config.channels, config.filters, config.kernel),
            nn.ReLU(),
            nn.Conv2d(config.filters, config.filters, config.kernel),
            nn.ReLU(),
            nn.MaxPool2d(config.pool),
            nn.Dropout(config.dropout),
            nn.Flatten(),
            nn.Linear(config.filters * side * side, config.dense),
            nn.ReLU(),
            nn.Linear(config.dense, config.image_dim),
        )

    def forward(self, images: Tensor) -> Tensor:
        """``(B, C, S, S)`` in [0, 1] -> ``(B, image_dim)``."""
        return self.features(images)


class FigureEncoder(nn.Module):
    """Text LSTM + image CNN + fusion (concatenation, batch norm, dense); see the module doc."""

    def __init__(self, config: FigureEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.text = TextLSTM(config)
        self.image = ImageCNN(config)
        self.norm = nn.BatchNorm1d(config.text_dim + config.image_dim)
        self.dense = nn.Linear(config.text_dim + config.image_dim, config.out_dim)

    def fuse(self, text: Tensor, image: Tensor, lengths: Tensor, has_image: Tensor) -> Tensor:
        has_text = (lengths > 0).to(text.dtype).unsqueeze(1)
        return self.dense(self.norm(masked_concat(text, image, has_text, has_image)))

    def forward(self, tokens: Tensor, lengths: Tensor, images: Tensor, has_image: Tensor) -> Tensor:
        """Figure embeddings ``(B, out_dim)`` of tokens ``(B, T)``, lengths ``(B,)``, images
        ``(B, C, S, S)`` and has_image ``(B, 1)``."""
        return self.fuse(self.text(tokens, lengths), self.image(images), lengths, has_image)
