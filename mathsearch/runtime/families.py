"""The encoder families, in one registry: for each, what its items need from featurisation, its
torch-free runtime and default version, its ONNX exporter, trainer and evaluator, and its command
line plug-ins.

* ``gcn``: runtime ``gcn_runtime``, default v7, exporter ``gcn_onnx``, trainer ``training``,
  evaluator ``evaluation``; items carry the MathML ``graph``;
* ``bitmap``: ``bitmap_runtime``, v1, ``bitmap_onnx``, ``bitmap_training``, ``bitmap_eval``;
  the ``latex`` (rendered);
* ``seq2seq``: ``seq2seq_runtime``, v2, ``seq2seq_onnx``, ``seq2seq_training``,
  ``seq2seq_eval``; SymPy ``prefix`` tokens;
* ``figure``: ``figure_runtime``, v2, ``figure_onnx``, ``figure_training``, ``figure_eval``; a
  ``figure`` record.

Runtimes live here, in :mod:`mathsearch.runtime`; exporters in :mod:`mathsearch.export`,
trainers and evaluators in :mod:`mathsearch.encoders`, command-line plug-ins in
:mod:`mathsearch.cli` (``train_<family>``, ``export_<family>``, ``eval_<family>``). The registry
names each module by its name inside its room, so this module imports nothing and no runtime's
imports lead back to it: :func:`~mathsearch.runtime.embedders.load_embedder` builds a runtime's
full name (:attr:`EncoderFamily.runtime_target`), and only the rooms above import the exporters,
trainers and plug-ins (:meth:`EncoderFamily.module` gives their full names), so the runtime never
loads torch.

The workers, the query encoder, :func:`mathsearch.runtime.embedders.load_embedder` and
:func:`~mathsearch.runtime.embedders.default_model_path` read the runtime, the default version and
the featurisation needs from here; ``mathsearch train`` / ``export`` / ``eval`` find their
family plug-ins here. A new family is one entry here plus its modules (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAMILY_REGISTRY", "EncoderFamily", "family_of_field", "needs_prefix"]


@dataclass(frozen=True)
class EncoderFamily:
    """One encoder family.

    Attributes:
        name: the family (a model card's ``family``; vector fields are ``vec_<name>_v<N>``).
        runtime: ``module:Class`` of its runtime in this room (:attr:`runtime_target` is the
            full name), an :class:`~mathsearch.runtime.embedder_base.Embedder` whose constructor
            takes ``(path, *, device, threads, settings)``.
        default_version: the shipped default model is ``<name>-v<default_version>.onnx``.
        exporter: its module in :mod:`mathsearch.export` that writes the ONNX model and card.
        trainer: its training module in :mod:`mathsearch.encoders`.
        evaluator: its evaluation module in :mod:`mathsearch.encoders`.
        cli_train: its ``mathsearch train <name>`` plug-in in :mod:`mathsearch.cli` (functions
            ``register(kinds)`` and ``run(args)``).
        cli_export: its ``mathsearch export CHECKPOINT`` plug-in in :mod:`mathsearch.cli`
            (``run_export(args)``).
        cli_eval: its ``mathsearch eval ...`` plug-in in :mod:`mathsearch.cli` (``register(kinds)``,
            ``run(args)``), or None where the built-in ``eval`` sub-commands serve it.
        item: what an item must carry: ``graph`` (the MathML graph), ``latex`` (rendered),
            ``prefix`` (SymPy prefix tokens) or ``figure`` (a figure record).
        with_prefix: featurisation computes SymPy prefix tokens for it (slow; only when asked).
    """

    name: str
    runtime: str
    default_version: int
    exporter: str
    trainer: str
    evaluator: str
    item: str
    cli_eval: str | None = None
    with_prefix: bool = False

    @property
    def field_prefix(self) -> str:
        return f"vec_{self.name}_"

    @property
    def runtime_target(self) -> str:
        """``mathsearch.runtime.<module>:<Class>`` of :attr:`runtime`."""
        return f"mathsearch.runtime.{self.runtime}"

    @property
    def default_model(self) -> str:
        """The file name of the shipped default model (``gcn-v7.onnx``)."""
        return f"{self.name}-v{self.default_version}.onnx"

    @property
    def cli_train(self) -> str:
        return f"train_{self.name}"

    @property
    def cli_export(self) -> str:
        return f"export_{self.name}"

    def module(self, role: str) -> str:
        """The full module name of ``role`` (``exporter``, ``trainer``, ``evaluator``,
        ``cli_train``, ``cli_export`` or ``cli_eval``).

        >>> FAMILY_REGISTRY["bitmap"].module("exporter")
        'mathsearch.export.bitmap_onnx'
        """
        rooms = {
            "exporter": "export",
            "trainer": "encoders",
            "evaluator": "encoders",
            "cli_train": "cli",
            "cli_export": "cli",
            "cli_eval": "cli",
        }
        if role not in rooms:
            raise ValueError(f"unknown role {role!r}; one of {sorted(rooms)}")
        name = getattr(self, role)
        if name is None:
            raise ValueError(f"the {self.name} family has no {role}")
        return f"mathsearch.{rooms[role]}.{name}"


FAMILY_REGISTRY: dict[str, EncoderFamily] = {
    family.name: family
    for family in (
        EncoderFamily(
            "gcn",
            runtime="gcn_runtime:GcnEmbedder",
            default_version=7,
            exporter="gcn_onnx",
            trainer="training",
            evaluator="evaluation",
            item="graph",
        ),
        EncoderFamily(
            "bitmap",
            runtime="bitmap_runtime:BitmapEmbedder",
            default_version=2,
            exporter="bitmap_onnx",
            trainer="bitmap_training",
            evaluator="bitmap_eval",
            cli_eval="eval_bitmap",
            item="latex",
        ),
        EncoderFamily(
            "seq2seq",
            runtime="seq2seq_runtime:Seq2SeqEmbedder",
            default_version=2,
            exporter="seq2seq_onnx",
            trainer="seq2seq_training",
            evaluator="seq2seq_eval",
            cli_eval="eval_seq2seq",
            item="prefix",
            with_prefix=True,
        ),
        EncoderFamily(
            "figure",
            runtime="figure_runtime:FigureEmbedder",
            default_version=2,
            exporter="figure_onnx",
            trainer="figure_training",
            evaluator="figure_eval",
            cli_eval="eval_figure",
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
