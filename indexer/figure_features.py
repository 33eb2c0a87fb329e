"""Featurisation of figures, shared by training, indexing and querying (no torch).

Text (seed section 5.1): the caption concatenated first with the mention text, lower-cased
words, stopwords removed, a light suffix stemmer (:func:`stem`; the seed used Porter, see
docs/encoder-figure.md), the first ``max_words`` (100) words, ids from a
:class:`FigureVocabulary` of the most frequent training words (1000): 0 is padding, 1 unknown.

Image: the figure file as a fixed-size array, ``channels`` (1 grey / 3 RGB) x ``size`` x
``size``, scaled into the square keeping the aspect ratio on a white background and divided by
255 (seed: 224 x 224 x 3 / 255). PNG and JPEG are read by Pillow; PDF (first page) by
``pdftoppm`` and EPS by ``gs`` when those programs are installed (Debian ``poppler-utils``,
``ghostscript``); anything that cannot be read gives ``None``, which the model sees as a zero
image with ``has_image = 0``.

The vocabulary's :attr:`FigureVocabulary.content_hash` covers the words and every setting
above, so a model card's ``vocab_hash`` pins the whole featurisation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "FigureFeatures",
    "FigureVocabulary",
    "featurise_figures",
    "figure_text",
    "load_image",
    "stem",
    "tokenize",
]

PAD, UNK = 0, 1
#: Version of :func:`tokenize` (stopwords + stemmer); part of the vocabulary hash.
TOKENIZER = "words-stop-lightstem/1"
_WORD = re.compile(r"[a-z][a-z]+")
#: A compact English stopword list (function words of the INQUERY list the seed used).
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each
either else etc few for from further had has have having he her here hers him his how
however i if in into is it its itself just may me might more most must my no nor not now
of off on once only or other our ours out over own same see shall she should so some
such than that the their theirs them then there these they this those through thus to
too under until up upon us use used using very via was we were what when where which
while who whom why will with within without would you your yours
"""
STOPWORDS = frozenset(re.findall(r"[a-z]+", _STOPWORD_TEXT))
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ies", "ied", "es", "ed", "ly", "s")


class FigureFeatureError(ValueError):
    """A vocabulary file that cannot be read or does not fit."""


def stem(word: str) -> str:
    """A light suffix stemmer (plurals, -ing, -ed, -ly, -ation), keeping at least 3 letters.

    >>> [stem(w) for w in ("figures", "plotting", "studies", "layout")]
    ['figur', 'plott', 'stud', 'layout']
    """
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix in ("s", "es") and word.endswith("ss"):
                return word
            return word[: -len(suffix)]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-case words of 2+ letters, stopwords dropped, stemmed."""
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def figure_text(item: Mapping[str, Any]) -> str:
    """The caption first, then the mentions (seed: "the figure caption was concatenated first")."""
    mentions = item.get("mentions") or []
    if isinstance(mentions, str):
        mentions = [mentions]
    return " ".join([str(item.get("caption") or ""), *(str(m) for m in mentions)]).strip()


@dataclass
class FigureVocabulary:
    """Word -> id (0 padding, 1 unknown, then the ``words`` by frequency) and the featurisation
    settings the ids and images depend on."""

    words: list[str]
    max_words: int = 100
    image_size: int = 64
    channels: int = 1
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {word: n + 2 for n, word in enumerate(self.words)}
        if self.channels not in (1, 3) or self.image_size < 8 or self.max_words < 1:
            raise FigureFeatureError("channels must be 1 or 3, image_size >= 8, max_words >= 1")

    @property
    def size(self) -> int:
        """Embedding rows the model needs (words + padding + unknown)."""
        return len(self.words) + 2

    @classmethod
    def build(
        cls, texts: Iterable[str], limit: int = 1000, min_count: int = 1, **settings: int
    ) -> FigureVocabulary:
        """The ``limit`` most frequent tokens of ``texts`` (ties by word)."""
        counts = Counter(token for text in texts for token in tokenize(text))
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w)
        )
        return cls(ranked[:limit], **settings)

    def settings(self) -> dict[str, int]:
        return {
            "max_words": self.max_words,
            "image_size": self.image_size,
            "channels": self.channels,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "mathsearch-figure-vocabulary/1",
            "tokenizer": TOKENIZER,
            **self.settings(),
            "words": self.words,
        }

    @property
    def content_hash(self) -> str:
        """SHA-256 of the words and the settings (the model card's ``vocab_hash``)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FigureVocabulary:
        """Raises FigureFeatureError: unreadable or not a figure vocabulary."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise FigureFeatureError(f"cannot read the figure vocabulary {path}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != "mathsearch-figure-vocabulary/1":
            raise FigureFeatureError(f"{path} is not a figure vocabulary")
        return cls(
            list(data["words"]),
            int(data["max_words"]),
            int(data["image_size"]),
            int(data["channels"]),
        )

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text``: int64 ``(n,)`` with ``n <= max_words`` (may be empty)."""
        ids = [self.index.get(token, UNK) for token in tokenize(text)[: self.max_words]]
        return np.asarray(ids, dtype=np.int64)


def _rasterise(path: Path, size: int) -> Path | None:
    """A PNG of a PDF's first page or an EPS file in a temporary folder (None when impossible)."""
    suffix = path.suffix.lower()
    out = Path(tempfile.mkdtemp(prefix="mathsearch-fig-"))
    try:
        if suffix == ".pdf" and shutil.which("pdftoppm"):
            cmd = [
                "pdftoppm",
                "-png",
                "-f",
                "1",
                "-l",
                "1",
                "-singlefile",
                "-scale-to",
                str(size * 2),
                str(path),
                str(out / "page"),
            ]
        elif suffix in (".eps", ".ps") and shutil.which("gs"):
            cmd = [
                "gs",
                "-q",
                "-dSAFER",
                "-dBATCH",
                "-dNOPAUSE",
                "-dEPSCrop",
                "-sDEVICE=png16m",
                "-r24",
                f"-sOutputFile={out / 'page.png'}",
                str(path),
            ]
        else:
            shutil.rmtree(out, ignore_errors=True)
            return None
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)
        page = out / "page.png"
        return page if page.is_file() else None
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("cannot rasterise %s: %s", path, exc)
        return None


def load_image(path: str | os.PathLike[str] | None, size: int, channels: int) -> np.ndarray | None:
    """The image at ``path`` as float32 ``(channels, size, size)`` in [0, 1], or None when it is
    missing or unreadable (the caller uses a zero image and ``has_image = 0``)."""
    if not path:
        return None
    from PIL import Image, UnidentifiedImageError

    source = Path(path)
    if not source.is_file():
        return None
    raster = (
        _rasterise(source, size) if source.suffix.lower() in (".pdf", ".eps", ".ps") else source
    )
    if raster is None:
        return None
    try:
        with Image.open(raster) as opened:
            opened.load()
            picture = opened.convert("RGBA")
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as exc:
        logger.debug("cannot read the image %s: %s", path, exc)
        return None
    finally:
        if raster is not source:
            shutil.rmtree(Path(raster).parent, ignore_errors=True)
    canvas = Image.new("RGBA", picture.size, (255, 255, 255, 255))
    canvas.alpha_composite(picture)
    picture = canvas.convert("L" if channels == 1 else "RGB")
    picture.thumbnail((size, size), Image.Resampling.BILINEAR)
    square = Image.new(picture.mode, (size, size), 255 if channels == 1 else (255, 255, 255))
    square.paste(picture, ((size - picture.width) // 2, (size - picture.height) // 2))
    array = np.asarray(square, dtype=np.float32) / 255.0
    return array[None] if channels == 1 else array.transpose(2, 0, 1).copy()


@dataclass
class FigureFeatures:
    """A batch of featurised figures, the model's inputs.

    ``tokens`` int64 ``(B, max_words)`` right-padded with 0, ``lengths`` int64 ``(B,)``,
    ``images`` float32 ``(B, channels, size, size)`` (zeros where missing), ``has_image``
    float32 ``(B, 1)``.
    """

    tokens: np.ndarray
    lengths: np.ndarray
    images: np.ndarray
    has_image: np.ndarray

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def take(self, rows: Sequence[int] | np.ndarray) -> FigureFeatures:
        rows = np.asarray(rows, dtype=np.int64)
        return FigureFeatures(
            self.tokens[rows], self.lengths[rows], self.images[rows], self.has_image[rows]
        )

    def trimmed(self) -> FigureFeatures:
        """The same figures with the token columns cut after the longest text (the LSTM is
        causal and reads each text's last real step, so the result does not change)."""
        width = max(int(self.lengths.max(initial=0)), 1)
        return FigureFeatures(self.tokens[:, :width], self.lengths, self.images, self.has_image)

    def feeds(self) -> dict[str, np.ndarray]:
        """ONNX Runtime feeds (input names of :mod:`mathsearch.export.figure_onnx`)."""
        return {
            "tokens": self.tokens,
            "lengths": self.lengths,
            "images": self.images,
            "has_image": self.has_image,
        }


def featurise_figures(
    items: Sequence[Mapping[str, Any]],
    vocabulary: FigureVocabulary,
    images: Sequence[np.ndarray | None] | None = None,
) -> FigureFeatures:
    """Featurise figure items (``caption``, ``mentions``, ``image`` path or None).

    ``images`` may give already loaded arrays (one per item) to skip :func:`load_image`.
    """
    count, width = len(items), vocabulary.max_words
    size, channels = vocabulary.image_size, vocabulary.channels
    tokens = np.zeros((count, width), dtype=np.int64)
    lengths = np.zeros((count,), dtype=np.int64)
    pixels = np.zeros((count, channels, size, size), dtype=np.float32)
    flags = np.zeros((count, 1), dtype=np.float32)
    for n, item in enumerate(items):
        ids = vocabulary.encode(figure_text(item))
        tokens[n, : len(ids)] = ids
        lengths[n] = len(ids)
        array = images[n] if images is not None else load_image(item.get("image"), size, channels)
        if array is not None:
            pixels[n] = array
            flags[n, 0] = 1.0
    return FigureFeatures(tokens, lengths, pixels, flags)
