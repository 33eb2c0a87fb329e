"""``mathsearch figures index|search``: the figures index (figure-embeddings seed).

``index`` extracts every figure environment of LaTeX sources (caption, the sentences that
``\\ref`` it, the image file when the source has it; :mod:`mathsearch.indexer.figures`), embeds it
with the
figure encoder (:mod:`mathsearch.runtime.figure_runtime`) and upserts it into ``<prefix>-figures``
(:mod:`mathsearch.opensearch.figure_index`). ``search`` answers query words in the same six hybrid
modes as
equation search (:mod:`mathsearch.opensearch.figure_search`).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.core.errors import MappingError, MathsearchOpenSearchError, QueryError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode

__all__ = ["add_figures", "run_figures"]


def add_figures(commands: Any) -> None:
    """Register ``figures`` (``index``, ``search``) on the ``mathsearch`` subparsers."""
    parser = commands.add_parser(
        "figures",
        help="index and search the figures of LaTeX sources (caption + mentions + image)",
        description="Figures of LaTeX sources in their own index, searched in the same hybrid "
        "modes as equations. See docs/encoder-figure.md.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch figures index papers/ --index mathsearch-figures
              mathsearch figures search 'phase diagram of the coupling' --mode rescore --alpha 0.3
              mathsearch figures search 'lattice spacing' --mode rrf --explain --json
            """),
        formatter_class=RAW_HELP,
    )
    actions = parser.add_subparsers(dest="figures_command", required=True, metavar="ACTION")
    index = actions.add_parser(
        "index",
        help="extract, embed and upsert the figures of .tex files / folders",
        epilog="example:\n  mathsearch figures index tests/resources/indexer/figures --json",
        formatter_class=RAW_HELP,
    )
    index.add_argument("sources", nargs="+", metavar="SRC", help=".tex files or folders")
    index.add_argument("--index", help="figures index (default <prefix>-figures)")
    index.add_argument("--model", help="figure .onnx model (default: the shipped figure-v2)")
    index.add_argument("--json", action="store_true", help="print the report as JSON")
    search = actions.add_parser(
        "search",
        help="search the figures index with words",
        epilog="example:\n  mathsearch figures search 'energy spectrum' --mode fusion --k 5",
        formatter_class=RAW_HELP,
    )
    search.add_argument("words", metavar="WORDS", help="the query (words, like a caption)")
    search.add_argument("--mode", choices=[m.value for m in Mode], default="rescore")
    search.add_argument("-k", "--k", type=int, default=10, help="results (default 10)")
    search.add_argument("--alpha", type=float, default=0.5, help="the vector's share (0.5)")
    search.add_argument("--window", type=int, default=100, help="rescore window (100)")
    search.add_argument(
        "--normalization", choices=[n.value for n in Normalization], default="min_max"
    )
    search.add_argument(
        "--combination", choices=[c.value for c in Combination], default="arithmetic_mean"
    )
    search.add_argument("--explain", action="store_true", help="per-subquery score breakdown")
    search.add_argument("--index", help="figures index (default <prefix>-figures)")
    search.add_argument("--model", help="figure .onnx model (default: the shipped figure-v2)")
    search.add_argument("--json", action="store_true", help="machine-readable output")


def run_figures(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch figures``."""
    from mathsearch.export.errors import ExportError

    try:
        return _index(args) if args.figures_command == "index" else _search(args)
    except (MathsearchOpenSearchError, ExportError, ValueError, OSError) as exc:
        return fail(str(exc))


def _index(args: argparse.Namespace) -> int:
    from mathsearch.indexer.figures import extract_figures
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.figure_index import index_figures
    from mathsearch.opensearch.figure_search import figures_alias
    from mathsearch.opensearch.settings import OpenSearchSettings
    from mathsearch.runtime.embedders import load_embedder

    settings = OpenSearchSettings.from_env()
    embedder = load_embedder(args.model or "figure")
    if embedder.family != "figure":
        return fail(f"{embedder.path} is a {embedder.family} model, not a figure model")
    index = figures_alias(settings, args.index)
    report = index_figures(connect(settings), index, extract_figures(args.sources), embedder)
    if args.json:
        emit(json.dumps({"index": index, **report.to_dict()}, indent=2))
        return 0
    refused = ", ".join(f"{k} {v}" for k, v in sorted(report.refused.items())) or "none"
    emit(
        f"{report.figures} figures -> {index}: {report.written} written, "
        f"{report.unchanged} unchanged, {report.embedded} embedded (refused: {refused}), "
        f"{report.failures} failure records"
    )
    return 0


def _with_model_hint(message: str, index_fields: Collection[str], wanted: str) -> str:
    """``message``, plus the ``--model`` that searches an index another figure model wrote (one
    with figure fields, none of them ``wanted``).

    >>> _with_model_hint("no field", {"vec_figure_v1", "vec_gcn_v7"}, "vec_figure_v2")
    'no field; search it with --model figure-v1.onnx'
    """
    from mathsearch.runtime.model_card import model_of_field

    written = [m for m in map(model_of_field, index_fields) if m and m.family == "figure"]
    if wanted in index_fields or not written:
        return message
    newest = max(written, key=lambda model: model.version)
    return f"{message}; search it with --model {newest.name}.onnx"


def _search(args: argparse.Namespace) -> int:
    from mathsearch.cli.search import format_response
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.figure_search import FigureQueryEncoder, figures_alias
    from mathsearch.opensearch.search_fields import FIGURE_FIELDS
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.searcher import Searcher
    from mathsearch.opensearch.settings import OpenSearchSettings

    settings = OpenSearchSettings.from_env()
    index = figures_alias(settings, args.index)
    encoder = FigureQueryEncoder(args.model)
    try:  # the field of the model that embeds the query (figure-v1's index: --model figure-v1)
        fields = replace(FIGURE_FIELDS, vectors=(encoder.vector_field,))
    except QueryError as exc:
        return fail(str(exc))
    searcher = Searcher(connect(settings), index, encoder=encoder, fields=fields)
    request = SearchRequest(
        args.words,
        mode=Mode(args.mode),
        k=args.k,
        alpha=args.alpha,
        window=args.window,
        normalization=Normalization(args.normalization),
        combination=Combination(args.combination),
        explain=args.explain,
    )
    try:
        response = searcher.search(request)
    except MappingError as exc:
        return fail(f"{exc} (index figures first: mathsearch figures index SRC...)")
    except QueryError as exc:
        return fail(_with_model_hint(str(exc), searcher.index_vector_fields(), fields.vectors[0]))
    if args.json:
        emit(json.dumps(response.to_dict(), indent=2, ensure_ascii=False))
    else:
        emit(format_response(response, explain=args.explain))
    return 0
