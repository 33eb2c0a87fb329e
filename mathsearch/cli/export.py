"""``mathsearch export`` and ``mathsearch bench embed`` (command-line parsing and output)."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.export.errors import (
    ExportError,
    ModelCardError,
    ModelMismatchError,
    RuntimeInputError,
)
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS
from mathsearch.runtime.model_card import card_path, load_card

__all__ = ["add_bench_embed", "add_export", "run_bench_embed", "run_export"]


def _train_extra_missing(exc: ImportError) -> int:
    return fail(
        f"this command needs the train extra (torch, torch-geometric): {exc}; "
        "pip install 'mathsearch[train]'"
    )


def add_export(commands: Any) -> None:
    """Register ``export`` on the ``mathsearch`` subparsers."""
    parser = commands.add_parser(
        "export",
        help="export a trained encoder to ONNX (+ model card, parity check)",
        description="Export a `mathsearch train gcn` checkpoint to ONNX with dynamic numbers of "
        "graphs, nodes and edges, check that ONNX Runtime matches PyTorch (eval mode) on real "
        "equations, and write MODEL.card.json beside MODEL.onnx.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch export runs/gcn/checkpoint.pt -o runs/gcn/gcn-v1.onnx
              mathsearch export runs/gcn/checkpoint.pt -o gcn-v2.onnx --version 2 \\
                  --metrics runs/gcn/eval-ranking.json --json
              mathsearch export runs/gcn/checkpoint.pt -o m.onnx \\
                  --parity-data corpus.jsonl --format jsonl --parity-equations 5000
              mathsearch export old/gcn-v7.onnx -o gcn-v7.onnx   the same model, written again
                                                   by today's exporter (a faster graph)
              mathsearch export export/models/gcn-v9.onnx -o /tmp/gcn-v9.onnx --int8
                                                   + /tmp/gcn-v9.int8.onnx, its int8 variant
              mathsearch export export/models/gcn-v9.onnx -o /tmp/gcn-v9.onnx --int8 \
                  --metrics rank.json   the variant's card takes its own hold-out ranking from
                                        `eval ranking ... --onnx A.onnx --onnx A.int8.onnx --json`
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="checkpoint.pt of a training run, or a shipped graph-CNN .onnx to write again "
        "with today's exporter (same model, name and version; --name/--version ignored)",
    )
    parser.add_argument("-o", "--out", required=True, metavar="MODEL.onnx", help="ONNX file")
    parser.add_argument("--name", help="model name (default: gcn-v<version>)")
    parser.add_argument("--version", type=int, default=1, help="model version (default 1)")
    parser.add_argument(
        "--parity-data",
        nargs="+",
        metavar="SRC",
        help="real equations for the parity check (default: ../shared/data/hepth2003)",
    )
    parser.add_argument("--format", choices=FORMATS, help="format of --parity-data")
    parser.add_argument(
        "--parity-equations", type=int, default=1000, help="equations checked (default 1000)"
    )
    parser.add_argument(
        "--tolerance", type=float, default=1e-4, help="max |onnx - torch| (default 1e-4)"
    )
    parser.add_argument(
        "--metrics", metavar="JSON", help="`mathsearch eval ranking --json` output for the card"
    )
    parser.add_argument(
        "--l2",
        action="store_true",
        help="seq2seq: the model outputs unit vectors (h_N / ||h_N||; dot product = cosine)",
    )
    parser.add_argument(
        "--cache-dir", help="featurised-corpus cache for the parity data (default: the run's)"
    )
    parser.add_argument(
        "--int8",
        action="store_true",
        help="also write MODEL.int8.onnx: row-scaled int8 products of the 512-wide layers",
    )
    parser.add_argument("--json", action="store_true", help="print the card as JSON")


def run_export(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch export``."""
    try:
        import mathsearch.export.export_model  # noqa: F401  (torch: the train extra)
    except ImportError as exc:
        return _train_extra_missing(exc)

    checkpoint = Path(args.checkpoint)
    if not checkpoint.is_file():
        return fail(f"checkpoint {checkpoint} does not exist")
    if checkpoint.suffix == ".onnx":
        return _reexport(args, checkpoint)
    from mathsearch.cli.families import checkpoint_family, export_module

    try:
        family = checkpoint_family(checkpoint)
    except Exception as exc:  # torch.load fails in many ways (pickle, zip, struct, OS)
        return fail(f"cannot read checkpoint {checkpoint}: {exc}")

    module = export_module(family)
    if module is None:
        return fail(f"{checkpoint} is a {family!r} checkpoint, which has no exporter")
    return int(module.run_export(args))


def _reexport(args: argparse.Namespace, model: Path) -> int:
    """``mathsearch export MODEL.onnx -o NEW.onnx``: the same graph CNN, today's exporter."""
    from mathsearch.bench.corpus import default_bench_sources
    from mathsearch.cli.export_gcn import emit_int8, emit_json, metrics_report
    from mathsearch.export.export_model import parity_sample
    from mathsearch.export.onnx_checkpoint import reexport_onnx

    sources = args.parity_data or default_bench_sources()
    try:
        family = load_card(model).family
        if family != "gcn":  # before parsing the parity equations
            return fail(f"{model} is a {family!r} model, not a graph CNN: nothing to re-export")
        graphs = parity_sample(sources, args.format, args.parity_equations, args.cache_dir)
        card, diff = reexport_onnx(
            model,
            args.out,
            graphs,
            tolerance=args.tolerance,
            parity_data=" ".join(str(Path(s).name) for s in sources),
        )
        variant = None
        if args.int8:
            from mathsearch.export.quantize import quantize_int8

            # --metrics: an `eval ranking --onnx A --onnx A.int8` report; the variant's card
            # takes its own score from it, never the float model's (variant_metrics)
            variant, _ = quantize_int8(args.out, graphs, metrics=metrics_report(args.metrics))
    except (ExportError, IndexerError, OSError, ValueError) as exc:  # ModelCardError too
        return fail(str(exc))
    if args.json:
        emit_json({**card.to_dict(), "max_abs_diff_to_original": diff}, variant)
        return 0
    emit(f"re-exported {card.name} ({card.vector_field}) from {model}")
    emit(f"  model: {args.out}  (opset {card.opset}, IR {card.ir_version})")
    emit(f"  card:  {card_path(args.out)}")
    emit(f"  same vectors: max |new - old| {diff:.2e} on {len(graphs)} real equations")
    if variant is not None:
        emit_int8(args.out, variant)
    return 0


def _batch_sizes(args: argparse.Namespace) -> list[int] | None:
    """``--batch-sizes`` as integers, None (after a one-line error) when they are not."""
    try:
        sizes = [int(x) for x in args.batch_sizes.split(",") if x.strip()]
    except ValueError:
        fail(f"--batch-sizes {args.batch_sizes!r} is not a list of integers")
        return None
    if not sizes or min(sizes) < 1 or args.equations < 1 or args.repeat < 1:
        fail("--batch-sizes, --equations and --repeat must be positive")
        return None
    return sizes


def _bench_bitmap(args: argparse.Namespace, sizes: list[int]) -> int:
    """``bench embed --onnx bitmap-vN.onnx``: render, network and end-to-end rates."""
    from mathsearch.bench.corpus import default_bench_sources
    from mathsearch.export.bench_embed_bitmap import (
        bench_bitmap_embed,
        format_bitmap_embed,
        sample_latex,
    )

    if len(args.onnx) != 1:
        return fail("time one bitmap model at a time (--onnx bitmap-vN.onnx)")
    try:
        latex = sample_latex(args.sources or default_bench_sources(), args.format, args.equations)
        report = bench_bitmap_embed(
            Path(args.onnx[0]),
            latex,
            sizes,
            repeat=args.repeat,
            threads=args.threads,
            device=None if args.device == "auto" else args.device,
        )
    except (ExportError, ModelCardError, ModelMismatchError, IndexerError, OSError) as exc:
        return fail(str(exc))
    emit(json.dumps(report, indent=2) if args.json else format_bitmap_embed(report))
    return 0


def _bench_files(args: argparse.Namespace) -> int:
    """``bench embed --onnx ...``: model files side by side (ONNX Runtime only)."""
    from mathsearch.bench.corpus import default_bench_sources
    from mathsearch.export.bench_embed import bench_onnx_files, format_files, sample_graphs

    sizes = _batch_sizes(args)
    if sizes is None:
        return 1
    missing = [path for path in args.onnx if not Path(path).is_file()]
    if missing:
        return fail(f"model {missing[0]} does not exist")
    try:
        families = {load_card(Path(path)).family for path in args.onnx}
    except (ModelCardError, OSError) as exc:
        return fail(str(exc))
    if "bitmap" in families:
        return _bench_bitmap(args, sizes)
    try:
        graphs = sample_graphs(args.sources or default_bench_sources(), args.format, args.equations)
        report = bench_onnx_files(
            graphs,
            args.onnx,
            batch_sizes=sizes,
            repeat=args.repeat,
            threads=args.threads,
            device=args.device,
            progress=not args.no_progress,
        )
    except (ExportError, ModelCardError, ModelMismatchError, RuntimeInputError) as exc:
        return fail(str(exc))
    except (IndexerError, OSError) as exc:
        return fail(str(exc))
    emit(json.dumps(report, indent=2) if args.json else format_files(report))
    return 0


def add_bench_embed(bench_cmds: Any) -> None:
    """Register ``bench embed`` on the ``bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "embed",
        help="equations/s of ONNX Runtime vs PyTorch eager by batch size",
        description="Embed the same real equations with ONNX Runtime and PyTorch eager (same "
        "network, same threads) at each batch size; medians of --repeat runs, end to end "
        "(batch building included) and the network alone, with the ratio.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench embed                       1,8,64,256,1024 on 1024 hep-th eqs
              mathsearch bench embed --batch-sizes 256 --equations 4096 --repeat 5 --json
              mathsearch bench embed --checkpoint runs/gcn/checkpoint.pt --device cuda
              mathsearch bench embed --onnx export/models/gcn-v7.onnx \\
                  --onnx models/gcn-v11.onnx --batch-sizes 256 --equations 2048
                                                   two model files, taking turns (no torch)
              mathsearch bench embed --onnx export/models/bitmap-v2.onnx --equations 512 \
                  --batch-sizes 1,64,256          rendering, network and both (bitmap CNN)
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "sources",
        nargs="*",
        metavar="SRC",
        help="default: ../shared/data/hepth2003/*.txt, else the bundled sample",
    )
    parser.add_argument("--format", choices=FORMATS)
    parser.add_argument("--equations", type=int, default=1024, help="equations (default 1024)")
    parser.add_argument(
        "--batch-sizes", default="1,8,64,256,1024", help="comma-separated (default %(default)s)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (default 3)")
    parser.add_argument("--threads", type=int, help="threads of both runtimes (default: all)")
    parser.add_argument("--checkpoint", help="weights (default: a fresh model, same speed)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--no-torch", action="store_true", help="ONNX Runtime only")
    parser.add_argument(
        "--onnx",
        action="append",
        metavar="MODEL.onnx",
        help="time these model files instead (repeatable; ratios to the first; no torch)",
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true")


def run_bench_embed(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch bench embed``."""
    if args.onnx:
        return _bench_files(args)
    try:
        from mathsearch.export.bench_embed import bench_embed, format_bench_embed
        from mathsearch.export.export_model import parity_sample
    except ImportError as exc:
        return _train_extra_missing(exc)
    from mathsearch.bench.corpus import default_bench_sources

    sizes = _batch_sizes(args)
    if sizes is None:
        return 1
    try:
        graphs = parity_sample(args.sources or default_bench_sources(), args.format, args.equations)
        report = bench_embed(
            graphs,
            checkpoint=args.checkpoint,
            batch_sizes=sizes,
            repeat=args.repeat,
            threads=args.threads,
            device=args.device,
            with_torch=not args.no_torch,
            progress=not args.no_progress,
        )
    except (
        ExportError,
        ModelCardError,
        ModelMismatchError,
        RuntimeInputError,
        IndexerError,
        OSError,
    ) as exc:
        return fail(str(exc))
    emit(json.dumps(report, indent=2) if args.json else format_bench_embed(report))
    return 0
