"""The encoder families, in one registry: for each, what its items need from featurisation, its
torch-free runtime, its ONNX exporter and its trainer.

=======  ======================  ===================  ============================
family   runtime (no torch)      exporter (torch)     trainer (torch)
=======  ======================  ===================  ============================
gcn      ``gcn_runtime``         ``gcn_onnx``         ``encoders.training``
bitmap   ``bitmap_runtime``      ``bitmap_onnx``      ``encoders.bitmap_training``
seq2seq  ``seq2seq_runtime``     ``seq2seq_onnx``     ``encoders.seq2seq_training``
figure   ``figure_runtime``      ``figure_onnx``      ``encoders.figure_training``
=======  ======================  ===================  ============================

(runtimes and exporters in ``mathsearch.export``)

The workers, the query encoder and :func:`mathsearch.export.embedders.load_embedder` read the
runtime and the featurisation needs from here; the command line's ``train`` / ``export``
plug-ins (``mathsearch.cli.train_<family>``, ``mathsearch.cli.export_<family>``) follow the names.
A new family is one entry here plus its modules (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAMILY_REGISTRY", "EncoderFamily", "family_of_field", "needs_prefix"]


@dataclass(frozen=True)
class EncoderFamily:
    """One encoder family.

    Attributes:
        name: the family (a model card's ``family``; vector fields are ``vec_<name>_v<N>``).
        runtime: ``module:Class`` of its runtime, an :class:`~mathsearch.export.embedder_base.
            Embedder` whose constructor takes ``(path, *, device, threads, settings)``.
        exporter: the module that writes its ONNX model and card (imports torch).
        trainer: the module of its training loop (imports torch).
        item: what an item must carry: ``graph`` (the MathML graph), ``latex`` (rendered),
            ``prefix`` (SymPy prefix tokens) or ``figure`` (a figure record).
        with_prefix: featurisation computes SymPy prefix tokens for it (slow; only when asked).
    """

    name: str
    runtime: str
    exporter: str
    trainer: str
    item: str
    with_prefix: bool = False

    @property
    def field_prefix(self) -> str:
        return f"vec_{self.name}_"


FAMILY_REGISTRY: dict[str, EncoderFamily] = {
    family.name: family
    for family in (
        EncoderFamily(
            "gcn",
            runtime="mathsearch.export.gcn_runtime:GcnEmbedder",
            exporter="mathsearch.export.gcn_onnx",
            trainer="mathsearch.encoders.training",
            item="graph",
        ),
        EncoderFamily(
            "bitmap",
            runtime="mathsearch.export.bitmap_runtime:BitmapEmbedder",
            exporter="mathsearch.export.bitmap_onnx",
            trainer="mathsearch.encoders.bitmap_training",
            item="latex",
        ),
        EncoderFamily(
            "seq2seq",
            runtime="mathsearch.export.seq2seq_runtime:Seq2SeqEmbedder",
            exporter="mathsearch.export.seq2seq_onnx",
            trainer="mathsearch.encoders.seq2seq_training",
            item="prefix",
            with_prefix=True,
        ),
        EncoderFamily(
            "figure",
            runtime="mathsearch.export.figure_runtime:FigureEmbedder",
            exporter="mathsearch.export.figure_onnx",
            trainer="mathsearch.encoders.figure_training",
            item="figure",
        ),
    )
}


def family_of_field(field: str) -> EncoderFamily | None:
    """The family whose vectors ``field`` holds (``vec_seq2seq_v2`` -> seq2seq), else None.

    >>> family_of_field("vec_seq2seq_v2").name
    'seq2seq'
    >>> family_of_field("embedding") is None
    True
    """
    for family in FAMILY_REGISTRY.values():
        if field.startswith(family.field_prefix):
            return family
    return None


def needs_prefix(families_or_fields: list[str] | tuple[str, ...]) -> bool:
    """Whether any of these families (or vector fields) reads SymPy prefix tokens.

    >>> needs_prefix(["gcn", "vec_seq2seq_v1"]), needs_prefix(("gcn", "bitmap"))
    (True, False)
    """
    for name in families_or_fields:
        family = FAMILY_REGISTRY.get(name) or family_of_field(name)
        if family is not None and family.with_prefix:
            return True
    return False
