"""``mathsearch bench query`` (command-line parsing and output); the work is in
:mod:`mathsearch.bench.query`."""

from __future__ import annotations

import argparse
import logging
import textwrap
from typing import Any

from mathsearch.bench.corpus import HELD_OUT, REPLICA_VECTORS
from mathsearch.bench.query import DEFAULT_MODES, DEFAULT_SIZES, bench_query
from mathsearch.bench.query_report import format_bench_query
from mathsearch.bench.timing import MODES
from mathsearch.cli.common import RAW_HELP, emit_report, fail, positive_int
from mathsearch.core.errors import MathsearchOpenSearchError
from mathsearch.export.errors import ExportError
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["add_bench_query", "add_bench_recall", "run_bench_query", "run_bench_recall"]


def add_bench_query(bench_cmds: Any) -> None:
    """Register ``bench query`` on the ``bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "query",
        help="search latency p50/p95/p99 and queries/s per mode at 10k, 100k, 1M equations",
        description="Index real hep-th equations (vectors from the real models, the default "
        "profile's second-stage fields included; beyond the ~88k indexable real ones, replicas "
        "with renamed identifiers) at each size into <prefix>-bench-<N> on the configured "
        "node, then time real formula queries (ARQMath, NTCIR topics and 10,000 held-out "
        "equations; no query is sent twice in a run) in each mode: latency percentiles end to "
        "end (query featurisation and embedding included) and cluster-side, queries/s from one "
        "sequential client, each row's p50 against kNN's, the second stage's share of the "
        "default profile's time, and the index size per equation. `default` is the shipped "
        "default profile as `search` and `serve` run it; fusion and rrf fuse on the cluster "
        "(neural-search pipeline), fusion-client and rrf-client in the client (one _msearch, "
        "then mget). Indexes are reused when they already hold the same corpus.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench query --sizes 2000 --queries 30        quick smoke run
              mathsearch bench query --sizes 100000 --force-merge     the default profile
                                              against kNN, BM25 and the first-stage fusions
              mathsearch bench query --sizes 10000,100000 --json --report bench.json
              mathsearch bench query --sizes 1000000 --modes fusion,rrf,fusion-client,rrf-client
              mathsearch bench query --sizes 100000 --max-df 0.2      drop very common tokens
              mathsearch bench query --sizes 100000 --modes fusion-client --depth 100
              mathsearch bench query --sizes 10000 --rebuild --force-merge --no-keep
              mathsearch bench query --sizes 10000 --modes bm25,fusion-client \
                  --rerank gcn-v8.onnx,gcn-v9.onnx,gcn-v10.onnx     the second stage's cost
              mathsearch bench query --sizes 100000 --modes knn,rrf-client --wildcards 200
                                              wildcard patterns (?x) against plain rrf-client
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "sources",
        nargs="*",
        metavar="SRC",
        help="corpus (default: ../shared/data/hepth2003/*.txt and hep_array.txt.xz)",
    )
    parser.add_argument("--format", choices=FORMATS, help="format of SRC (default: from the name)")
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="comma-separated index sizes in equations (default %(default)s)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated modes among {', '.join(MODES)}; default: the shipped default "
        "profile (`default`, its second stage included) beside the first-stage modes it is "
        "measured against (%(default)s)",
    )
    parser.add_argument(
        "--queries", type=int, default=200, help="timed queries per mode (default 200)"
    )
    parser.add_argument("--warmup", type=int, default=20, help="untimed queries per mode (20)")
    parser.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    parser.add_argument(
        "--max-df",
        type=float,
        metavar="F",
        help="leave query tokens that occur in more than F x the index's documents out of the "
        "BM25 query (default: the default search profile's)",
    )
    parser.add_argument(
        "--max-terms",
        type=int,
        metavar="N",
        help="BM25 gets the N most informative distinct query tokens (0: all; default: the "
        "default search profile's)",
    )
    parser.add_argument(
        "--depth",
        type=int,
        metavar="N",
        help="hits per subquery of fusion / rrf (raised to --k; default: the default search "
        "profile's)",
    )
    parser.add_argument(
        "--rerank",
        metavar="E1,E2",
        help="also time each hybrid mode with the second stage (a <mode>+rerank row): its top "
        "--rerank-window hits re-ranked by these encoders at query time, e.g. "
        "gcn-v8.onnx,gcn-v9.onnx,gcn-v10.onnx",
    )
    parser.add_argument(
        "--rerank-window", type=int, default=50, help="hits the second stage re-ranks (50)"
    )
    parser.add_argument(
        "--keep",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the bench indexes for the next run (default: keep)",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="rebuild the indexes even when reusable"
    )
    parser.add_argument(
        "--replica-vectors",
        choices=REPLICA_VECTORS,
        default="embed",
        help="vectors of renamed replicas: embed them with the model (default) or copy the "
        "original's (a shortcut, flagged in the report)",
    )
    parser.add_argument(
        "--force-merge", action="store_true", help="merge each index to one segment first"
    )
    parser.add_argument(
        "--held-out-queries",
        type=positive_int,
        default=HELD_OUT,
        metavar="N",
        help="corpus equations held out of every index as queries (default %(default)s; a "
        "corpus needs more unique equations than this)",
    )
    parser.add_argument(
        "--wildcards",
        type=int,
        default=0,
        metavar="N",
        help="also time N wildcard queries (a `wildcard` row): patterns with variables (?x) "
        "made from the query pool by the generator of `eval retrieval --task wildcard`, "
        "each an rrf-client request (rrf-client is added to --modes when missing) with the "
        "shipped wildcard first stage (bm25) and the structural check; "
        "the report gives p50 / p99 and the p50 ratio to plain rrf-client (goal <= 2x; "
        "default 0: no row)",
    )
    parser.add_argument("--report", metavar="JSON", help="also write the JSON report here")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _check(args: argparse.Namespace) -> tuple[list[int], list[str]] | str:
    """The sizes and modes of ``args``, or what is wrong with them."""
    try:
        sizes = [int(x) for x in str(args.sizes).split(",") if x.strip()]
    except ValueError:
        return f"--sizes {args.sizes!r} is not a list of integers"
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        return f"unknown mode(s) {', '.join(unknown)}: use {', '.join(MODES)}"
    if not sizes or min(sizes) < 1 or not modes:
        return "--sizes must be positive integers and --modes not empty"
    if args.queries < 1 or args.warmup < 0 or not 1 <= args.k <= 10_000:
        return "--queries must be >= 1, --warmup >= 0 and --k in [1, 10000]"
    if args.max_df is not None and not 0.0 < args.max_df <= 1.0:
        return f"--max-df must lie in (0, 1], not {args.max_df}"
    if args.max_terms is not None and args.max_terms < 0:
        return f"--max-terms must be >= 0 (0: every token), not {args.max_terms}"
    if args.depth is not None and args.depth < 1:
        return f"--depth must be >= 1, not {args.depth}"
    if getattr(args, "rerank_window", 50) < 1:
        return f"--rerank-window must be >= 1, not {args.rerank_window}"
    if getattr(args, "wildcards", 0) < 0:
        return f"--wildcards must be >= 0 (0: no wildcard row), not {args.wildcards}"
    return sizes, modes


def run_bench_query(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch bench query``."""
    checked = _check(args)
    if isinstance(checked, str):
        return fail(checked)
    sizes, modes = checked
    try:
        from mathsearch.opensearch.client import connect
        from mathsearch.opensearch.search_profile import SearchProfile
        from mathsearch.opensearch.settings import OpenSearchSettings
        from mathsearch.runtime.embedders import parse_encoders

        settings = OpenSearchSettings.from_env()
        client = connect(settings, pool_maxsize=4)  # parallel_bulk uses 2 threads
        profile = SearchProfile.default()  # what users get unless a flag says otherwise
        report = bench_query(
            client,
            settings,
            sizes=sizes,
            modes=modes,
            queries=args.queries,
            warmup=args.warmup,
            k=args.k,
            max_df=args.max_df if args.max_df is not None else profile.max_df,
            max_terms=args.max_terms if args.max_terms is not None else profile.max_terms,
            depth=args.depth if args.depth is not None else profile.depth,
            sources=args.sources or None,
            fmt=args.format,
            replica_vectors=args.replica_vectors,
            rebuild=args.rebuild,
            keep=args.keep,
            force_merge=args.force_merge,
            progress=not args.no_progress,
            rerank=parse_encoders(args.rerank) if args.rerank else (),
            rerank_window=args.rerank_window,
            held_out=args.held_out_queries,
            wildcards=args.wildcards,
        )
    except Exception as exc:
        return _failed(exc)
    emit_report(args, report, format_bench_query)
    return 0


def _failed(exc: Exception) -> int:
    """A bench failure as one line (ours, the model's, the featuriser's, I/O, opensearch-py's
    transport errors); anything else is a bug and keeps its traceback."""
    if isinstance(exc, (MathsearchOpenSearchError, ExportError, IndexerError, OSError, ValueError)):
        return fail(str(exc))
    if type(exc).__module__.startswith("opensearchpy"):
        return fail(f"OpenSearch: {exc}")
    raise exc


def add_bench_recall(bench_cmds: Any) -> None:
    """Register ``bench recall`` on the ``bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "recall",
        help="recall@k of the HNSW search against exact search, per candidate count",
        description="For real formula queries (ARQMath / NTCIR topics, featurised and embedded "
        "as `search` does), find the exact top k of the index's default vector field by "
        "brute force (script_score with knn_score), then ask the HNSW graph for each number of "
        "candidates and report mean recall@k and latency p50/p99. The index: --index, else "
        "the 100k index of `bench query` (<prefix>-bench-100000).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench recall                                   the 100k bench index
              mathsearch bench recall --index mathsearch-equations --queries 50 --json
              mathsearch bench recall --candidates 10,15,20,30 --k 10
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("--index", help="equation alias (default <prefix>-bench-100000)")
    parser.add_argument("--queries", type=int, default=200, help="query formulas (200)")
    parser.add_argument(
        "--candidates", default="10,20,50,100",
        help="comma-separated HNSW candidate counts, each >= k (default 10,20,50,100)",
    )  # fmt: skip
    parser.add_argument("--k", type=int, default=10, help="recall@k (10)")
    parser.add_argument("--report", metavar="JSON", help="also write the JSON report here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_bench_recall(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch bench recall``."""
    try:
        candidates = [int(part) for part in args.candidates.split(",") if part.strip()]
    except ValueError:
        return fail(f"--candidates must be integers, not {args.candidates!r}")
    if not candidates or args.k < 1 or min(candidates) < args.k or args.queries < 1:
        return fail("--k and --queries must be >= 1 and every candidate count >= k")
    try:
        from mathsearch.bench.recall import knn_recall
        from mathsearch.bench.serve import bench_queries
        from mathsearch.opensearch.client import connect
        from mathsearch.opensearch.query_encoder import ModelQueryEncoder
        from mathsearch.opensearch.searcher import Searcher
        from mathsearch.opensearch.settings import OpenSearchSettings

        settings = OpenSearchSettings.from_env()
        client = connect(settings)
        alias = args.index or f"{settings.index_prefix}-bench-100000"
        searcher = Searcher(client, alias)
        field = searcher.default_field()
        mapping = searcher.call(lambda: client.indices.get_mapping(index=alias))
        spec = next(iter(mapping.values()))["mappings"]["properties"][field]
        space = spec.get("method", {}).get("space_type") or spec.get("space_type", "l2")
        encoder = ModelQueryEncoder()
        vectors = []
        for latex in bench_queries()[: args.queries * 2]:
            try:
                features = encoder.features(latex)
            except MathsearchOpenSearchError:  # a topic the featuriser cannot read
                continue
            if features.vector_field != field:
                return fail(f"the default model writes {features.vector_field}, {alias} "
                            f"searches {field}: set MATHSEARCH_MODEL to its model")  # fmt: skip
            if features.vector is not None:
                vectors.append(features.vector)
            if len(vectors) == args.queries:
                break
        report = knn_recall(client, alias, field, space, vectors, candidates=candidates, k=args.k)
    except Exception as exc:
        return _failed(exc)
    emit_report(args, report, format_bench_recall)
    return 0


def format_bench_recall(report: dict[str, Any]) -> str:
    """The report as a table."""
    k = report["k"]
    lines = [
        f"bench recall: {report['index']} field {report['field']} ({report['space_type']}), "
        f"{report['queries']} queries; exact top {k} by brute force: p50 "
        f"{report['exact_ms']['p50']} ms, p99 {report['exact_ms']['p99']} ms",
        f"  candidates  recall@{k}  min   p50 ms  p99 ms",
    ]
    for row in report["rows"]:
        lines.append(
            f"  {row['candidates']:>10}  {row[f'recall@{k}']:>8.3f}  {row['min_recall']:.1f}"
            f"  {row['p50_ms']:>6}  {row['p99_ms']:>6}"
        )
    return "\n".join(lines)
