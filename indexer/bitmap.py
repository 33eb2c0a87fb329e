"""Equations rendered to grey-level bitmaps: the input of the bitmap CNN (ecml2019 seed, sec. 3).

The seed: "The images we create are 531x106 pixels in size, however for more efficient learning
we only use the center rectangle of size 333x32 pixels for training. This decrease in height
does not affect single-line equations, the decrease in width does not affect equations that fit
into a single column in a two-column layout, longer equations will miss beginning and end."

Convention: :func:`render_bitmap` returns ``uint8`` ``(106, 531)`` (rows, columns), 255 = white
paper, 0 = black ink, anti-aliased grey between. Equations are set at 10 pt Computer Modern and
100 dpi, a page at 100 dpi: 531 px is about a text width, 333 px a column width, a line of
math 12-30 px tall, so the seed's remarks on the crop hold (hep-th 2003: 83 % of single-line
equations fit the 32 rows, 78 % the 333 columns). The ink's bounding box is centred; one larger
than the canvas is shrunk to fit (Lanczos, aspect kept). :func:`centre_crop` cuts the 333x32
centre (rows 37-68, columns 99-431).

Backend and limits: matplotlib mathtext (``MathTextParser("agg")``: its own TeX-subset parser,
FreeType, the Agg rasteriser; no pyplot, no figure, no rcParams changed - the font set is passed
per call). No TeX is installed, so:

* :func:`to_mathtext` (in :mod:`mathsearch.indexer.mathtext_latex`) rewrites what mathtext lacks:
  ``\\over``/``\\choose``/``\\atop``, ``\\mbox``/``\\hbox``/``\\textrm``, ``\\big``-sized
  delimiters, ``\\displaystyle``, ``\\limits``, ``\\label``, ``\\nonumber``, ``\\hspace``,
  ``\\tfrac``, ``\\stackrel``, unbraced arguments (``\\frac12``), ``\\ge``/``\\le`` ...;
  fractions stay text-style;
* arrays and matrices become ``\\substack`` rows with cells apart by ``\\quad`` (no column
  alignment); top-level rows (``\\\\``, ``split``, ``eqnarray``) are set one per line, centred;
* an unknown command (an unexpanded user macro) fails with ``unknown-macro``, as the seed dropped
  equations that did not compile - unless ``unknown_commands="text"`` draws it as upright text;
* fewer than ``min_ink_pixels`` ink pixels fail with ``blank`` (the seed's cleaning).

:class:`RenderError` carries the reason (``empty``, ``too-large``, ``unknown-macro``, ``syntax``,
``blank``, ``render-error``); :func:`render_batch` turns it into a ``Failure`` (stage
``render``). A lock serialises mathtext (shared parser state): threads are safe, not parallel;
Celery prefork workers are processes and render in parallel (30-45 equations/s each here).
First 2,000 hep-th 2003 equations: 81.7 % rendered (the rest mostly user macros), 99.0 % with
``unknown_commands="text"``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.mathtext import MathTextParser
from PIL import Image

from mathsearch.indexer.mathtext_latex import RenderError, to_mathtext
from mathsearch.indexer.records import Failure, content_id, excerpt
from mathsearch.indexer.settings import IndexerSettings, SettingsError

logger = logging.getLogger(__name__)

__all__ = [
    "CROP_HEIGHT",
    "CROP_WIDTH",
    "HEIGHT",
    "WIDTH",
    "BitmapSettings",
    "RenderError",
    "centre_crop",
    "render_batch",
    "render_bitmap",
    "settings_hash",
    "to_mathtext",
]

WIDTH, HEIGHT = 531, 106
CROP_WIDTH, CROP_HEIGHT = 333, 32

_PARSER = MathTextParser("agg")


class _Serial:
    """One lock per process around the shared mathtext parser, renewed in forked children (a child
    forked while another thread held it must not inherit it locked)."""

    lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: setattr(_Serial, "lock", threading.Lock()))


@dataclass(frozen=True)
class BitmapSettings:
    """Canvas, crop and typesetting parameters (defaults follow the seed, see module doc)."""

    width: int = WIDTH
    height: int = HEIGHT
    crop_width: int = CROP_WIDTH
    crop_height: int = CROP_HEIGHT
    fontsize: float = 10.0
    dpi: int = 100
    fontset: str = "cm"
    line_gap: int = 4
    min_ink_pixels: int = 8
    max_chars: int = 20_000
    unknown_commands: str = "fail"

    def __post_init__(self) -> None:
        if self.unknown_commands not in ("fail", "text"):
            raise SettingsError(f"unknown_commands={self.unknown_commands!r}: use fail or text")

    @classmethod
    def from_indexer(cls, settings: IndexerSettings) -> BitmapSettings:
        return cls(max_chars=settings.max_equation_chars)


# ----------------------------------------------------------------------------- rendering


@functools.lru_cache(maxsize=4096)
def _known_command(name: str) -> bool:
    """Whether mathtext knows ``\\name`` (probed once per name and process)."""
    for number, probe in enumerate(
        (f"$\\{name}$", f"$\\{name}{{x}}{{y}}$", f"$\\left(x\\{name})$")
    ):
        try:
            with _Serial.lock:
                _PARSER.parse(probe, dpi=72, prop=FontProperties(size=10))
            return True
        except Exception as exc:  # any error but "unknown symbol" means "known"
            if number == 0 and "Unknown symbol" not in str(exc):
                return True
    return False


def _rasterise(line: str, settings: BitmapSettings) -> np.ndarray:
    """Ink coverage (0..255, ``uint8``) of one mathtext line, trimmed to its ink."""
    names = set(re.findall(r"\\(?:\\|([a-zA-Z]+))", line)) - {""}  # "\\\\" is no command
    unknown = sorted(name for name in names if not _known_command(name))
    if unknown and settings.unknown_commands != "text":
        listed = ", ".join("\\" + name for name in unknown[:5])
        raise RenderError(f"unknown command {listed}", "unknown-macro")
    for name in unknown:
        line = re.sub(rf"\\{name}(?![a-zA-Z])", rf"\\mathrm{{{name}}}", line)
    prop = FontProperties(size=settings.fontsize, math_fontfamily=settings.fontset)
    try:
        with _Serial.lock:
            parsed = _PARSER.parse(f"${line}$", dpi=settings.dpi, prop=prop, antialiased=True)
    except ValueError as exc:
        message = str(exc).strip().splitlines()[-1][:200]
        raise RenderError(message, "syntax") from exc
    ink = np.asarray(parsed.image, dtype=np.uint8)
    rows, cols = np.nonzero(ink)
    if rows.size == 0:
        return np.zeros((0, 0), dtype=np.uint8)
    return ink[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]


def _stack(parts: list[np.ndarray], gap: int) -> np.ndarray:
    parts = [part for part in parts if part.size]
    if not parts:
        return np.zeros((0, 0), dtype=np.uint8)
    width = max(part.shape[1] for part in parts)
    height = sum(part.shape[0] for part in parts) + gap * (len(parts) - 1)
    out = np.zeros((height, width), dtype=np.uint8)
    top = 0
    for part in parts:
        left = (width - part.shape[1]) // 2
        out[top : top + part.shape[0], left : left + part.shape[1]] = part
        top += part.shape[0] + gap
    return out


def render_bitmap(latex: str, settings: BitmapSettings | None = None) -> np.ndarray:
    """Render display-math LaTeX to a ``(height, width)`` ``uint8`` grey image (255 = paper).

    Raises :class:`RenderError` (with a reason code) when the equation cannot be drawn.
    """
    settings = settings or BitmapSettings()
    if not isinstance(latex, str) or not latex.strip():
        raise RenderError("empty equation", "empty")
    if len(latex) > settings.max_chars:
        raise RenderError(f"{len(latex)} characters > {settings.max_chars}", "too-large")
    lines = to_mathtext(latex)
    if not lines:
        raise RenderError("nothing to draw after pre-processing", "empty")
    try:
        ink = _stack([_rasterise(line, settings) for line in lines], settings.line_gap)
    except RenderError:
        raise
    except Exception as exc:  # mathtext raises assorted errors on odd input
        raise RenderError(f"{type(exc).__name__}: {exc}"[:200], "render-error") from exc
    if np.count_nonzero(ink > 127) < settings.min_ink_pixels:
        raise RenderError("image has (almost) no ink", "blank")
    height, width = ink.shape
    scale = min(1.0, settings.width / width, settings.height / height)
    if scale < 1.0:
        size = (
            max(1, min(settings.width, round(width * scale))),
            max(1, min(settings.height, round(height * scale))),
        )
        ink = np.asarray(Image.fromarray(ink).resize(size, Image.Resampling.LANCZOS))
        if 0 < ink.max() < 255:  # thin strokes fade when shrunk a lot: keep the darkest black
            ink = (ink.astype(np.float32) * (255.0 / ink.max())).round().astype(np.uint8)
        height, width = ink.shape
    canvas = np.full((settings.height, settings.width), 255, dtype=np.uint8)
    top, left = (settings.height - height) // 2, (settings.width - width) // 2
    canvas[top : top + height, left : left + width] = 255 - ink
    return canvas


def centre_crop(bitmap: np.ndarray, settings: BitmapSettings | None = None) -> np.ndarray:
    """The seed's centre rectangle: a ``(32, 333)`` copy from the middle of a bitmap."""
    settings = settings or BitmapSettings()
    if (
        bitmap.ndim != 2
        or min(bitmap.shape) < settings.crop_height
        or (bitmap.shape[1] < settings.crop_width)
    ):
        raise RenderError(f"bitmap of shape {bitmap.shape} is smaller than the crop", "too-large")
    top = (bitmap.shape[0] - settings.crop_height) // 2
    left = (bitmap.shape[1] - settings.crop_width) // 2
    return bitmap[top : top + settings.crop_height, left : left + settings.crop_width].copy()


def render_batch(
    latexes: Iterable[str],
    settings: BitmapSettings | None = None,
    eq_ids: Sequence[str] | None = None,
    doc_id: str = "",
) -> list[np.ndarray | Failure]:
    """Render many equations; a bad one becomes a ``Failure`` (stage ``render``), never raises.

    ``eq_ids`` names the failures (default, and past its end: a content id of the LaTeX).
    """
    settings = settings or BitmapSettings()
    results: list[np.ndarray | Failure] = []
    for index, latex in enumerate(latexes):
        text = latex if isinstance(latex, str) else ""
        eq_id = eq_ids[index] if eq_ids is not None and index < len(eq_ids) else content_id(text)
        try:
            results.append(render_bitmap(text, settings))
            continue
        except RenderError as exc:
            reason, detail = exc.reason, str(exc)
        except Exception as exc:  # errors are data: nothing raises out of a batch
            logger.warning("unexpected render error for %s: %r", eq_id, exc)
            reason, detail = "render-error", repr(exc)
        results.append(
            Failure(
                eq_id=eq_id,
                doc_id=doc_id,
                stage="render",
                reason=reason,
                detail=detail[:300],
                excerpt=excerpt(text),
            )
        )
    failed = sum(isinstance(result, Failure) for result in results)
    if failed:
        logger.info("rendered %d of %d equations", len(results) - failed, len(results))
    return results


#: BitmapSettings fields that do not change a rendered crop (only which equations are tried).
_NOT_SHAPING = ("max_chars",)


def settings_hash(settings: BitmapSettings | None = None) -> str:
    """SHA-256 of the render settings that shape the network's input (the card's vocab_hash).

    >>> len(settings_hash())
    64
    """
    data = {k: v for k, v in asdict(settings or BitmapSettings()).items() if k not in _NOT_SHAPING}
    text = json.dumps({"family": "bitmap", "settings": data}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
