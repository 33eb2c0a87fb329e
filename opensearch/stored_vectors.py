"""Vectors stored for exact scoring only: a second stage's fields, without an ANN graph.

A field that only re-ranks a window of candidates (:mod:`mathsearch.opensearch.window_rerank`)
is never searched by kNN, so it needs no HNSW graph. It is stored the cheapest way that keeps
the ranking: an OpenSearch ``binary`` field with doc values, holding the vector's bytes
(:class:`VectorStorage`)::

    hnsw     knn_vector, lucene HNSW, float32   kNN search + exact scripts (4 B a dimension)
    float16  binary doc values, IEEE half        2 B a dimension (128-d: 256 B)
    int8     binary doc values, round(127 v / max|v|)   1 B a dimension (128-d: 128 B)

The cosine is scale-free, so ``int8`` keeps each vector's direction within a rounding step of
1/127 of its largest component and needs no scale stored. The window's vectors come back in the
same search as its exact BM25 scores (``docvalue_fields``: base64, one round trip), and the
cosines are computed here (:func:`cosines01`), as the k-NN plugin scores ``cosinesimil``:
``(1 + cos) / 2``. Writing the field costs no graph build and no merge-time graph work.

Example::

    text = encode_vector([0.6, -0.8], VectorStorage.FLOAT16)     # 'zThm+g==' (base64)
    (back,) = decode_vectors([text], VectorStorage.FLOAT16, 2)   # array([ 0.6, -0.8])
    cosines01(np.array([0.6, -0.8]), [back])                     # [1.0]
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import numpy as np

from mathsearch.core.errors import MappingError

logger = logging.getLogger(__name__)

__all__ = [
    "VectorStorage",
    "cosines01",
    "decode_vectors",
    "encode_column",
    "encode_stored",
    "encode_vector",
    "stored_bytes",
    "stored_mapping",
]


class VectorStorage(StrEnum):
    """How a vector field is kept (see the module docstring)."""

    HNSW = "hnsw"
    FLOAT16 = "float16"
    INT8 = "int8"

    @property
    def exact_only(self) -> bool:
        """Whether the field is read back for exact scores only (no ANN graph, no kNN query)."""
        return self is not VectorStorage.HNSW

    @classmethod
    def parse(cls, value: str | VectorStorage) -> VectorStorage:
        """``value`` as a storage; an unknown one is a :class:`MappingError` naming the known.

        >>> VectorStorage.parse("float16").value
        'float16'
        """
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(member.value for member in cls)
            raise MappingError(f"vector storage must be one of {known}, not {value!r}") from None


_DTYPES: dict[VectorStorage, np.dtype[Any]] = {
    VectorStorage.FLOAT16: np.dtype("<f2"),
    VectorStorage.INT8: np.dtype("i1"),
}


def stored_bytes(storage: VectorStorage, dimension: int) -> int:
    """Bytes of one stored vector (its doc value; ``_source`` holds the base64 form too).

    >>> stored_bytes(VectorStorage.FLOAT16, 128), stored_bytes(VectorStorage.INT8, 128)
    (256, 128)
    """
    if storage is VectorStorage.HNSW:
        return 4 * dimension
    return _DTYPES[storage].itemsize * dimension


def stored_mapping() -> dict[str, Any]:
    """The mapping of an exact-only field: ``binary`` with doc values (read by
    ``docvalue_fields``; never indexed, so nothing is built for it)."""
    return {"type": "binary", "doc_values": True}


def encode_vector(vector: Sequence[float] | np.ndarray, storage: VectorStorage) -> str:
    """The base64 text of ``vector`` in ``storage`` (float16 or int8).

    Raises:
        MappingError: ``hnsw`` (a float list is written as it is) or a vector that is not finite.
    """
    if storage is VectorStorage.HNSW:
        raise MappingError("an hnsw field holds the float list itself, not encoded bytes")
    values = np.asarray(vector, dtype=np.float32).ravel()
    if not np.all(np.isfinite(values)):
        raise MappingError("a vector with NaN or infinite values cannot be stored")
    if storage is VectorStorage.FLOAT16:
        raw = values.astype("<f2").tobytes()
    else:
        top = float(np.max(np.abs(values))) if values.size else 0.0
        scaled = values * (127.0 / top) if top > 0 else values
        raw = np.clip(np.rint(scaled), -127, 127).astype("i1").tobytes()
    return base64.b64encode(raw).decode("ascii")


def encode_column(
    column: Sequence[Sequence[float] | str | None], storage: VectorStorage
) -> list[str | None]:
    """One field's vectors of a batch encoded (None stays None: that encoder refused the
    equation; an already encoded text is kept)."""
    return [
        value if value is None or isinstance(value, str) else encode_vector(value, storage)
        for value in column
    ]


def encode_stored(
    columns: Mapping[str, Sequence[Sequence[float] | str | None]],
    stored: Mapping[str, str | VectorStorage],
) -> dict[str, Sequence[Sequence[float] | str | None]]:
    """A batch's vectors by field as they are written: the exact-only fields of ``stored``
    (field -> storage) encoded (:func:`encode_column`), the kNN fields' float lists as they are.

    >>> encode_stored({"vec_a": [[0.6, -0.8]], "vec_b": [[1.0, 0.0]]}, {"vec_b": "float16"})
    {'vec_a': [[0.6, -0.8]], 'vec_b': ['ADwAAA==']}
    """
    out: dict[str, Sequence[Sequence[float] | str | None]] = dict(columns)
    for name, storage in stored.items():
        if name in out:
            out[name] = encode_column(out[name], VectorStorage.parse(storage))
    return out


def decode_vectors(
    values: Sequence[str | None], storage: VectorStorage, dimension: int
) -> list[np.ndarray | None]:
    """float32 vectors of base64 texts (as ``_source`` or ``docvalue_fields`` give them, with
    or without ``=`` padding); None for a missing or malformed value (logged), never an error:
    the candidate then gets no term for that field, as a refused one."""
    dtype = _DTYPES[storage]
    want = dtype.itemsize * dimension
    out: list[np.ndarray | None] = []
    for value in values:
        if not value:
            out.append(None)
            continue
        try:
            raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != want:
            logger.warning(
                "a stored %s vector of %d bytes, not %d: left out", storage, len(raw), want
            )
            out.append(None)
            continue
        out.append(np.frombuffer(raw, dtype=dtype).astype(np.float32))
    return out


def cosines01(query: np.ndarray, vectors: Sequence[np.ndarray | None]) -> list[float | None]:
    """``(1 + cos(query, v)) / 2`` of each vector (None stays None; a zero vector scores 0.5),
    the k-NN plugin's ``cosinesimil`` score.

    >>> cosines01(np.array([1.0, 0.0]), [np.array([0.0, 2.0]), None, np.array([3.0, 0.0])])
    [0.5, None, 1.0]
    """
    present = [i for i, v in enumerate(vectors) if v is not None]
    out: list[float | None] = [None] * len(vectors)
    if not present:
        return out
    q = np.asarray(query, dtype=np.float64).ravel()
    matrix = np.stack([np.asarray(vectors[i], dtype=np.float64).ravel() for i in present])
    if matrix.shape[1] != q.size:
        raise MappingError(f"a stored vector has {matrix.shape[1]} dimensions, the query {q.size}")
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(q))
    dots = matrix @ q
    cos = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    for i, value in zip(present, cos, strict=True):
        out[i] = (1.0 + float(value)) / 2.0
    return out
