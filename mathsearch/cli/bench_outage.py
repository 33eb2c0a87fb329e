"""``mathsearch bench outage``: the command line of :mod:`mathsearch.bench.outage`."""

from __future__ import annotations

import argparse
import itertools
import json
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import emit, fail, positive_int
from mathsearch.core.paths import SHARED_DATA

RAW_HELP = argparse.RawDescriptionHelpFormatter
HEP_ARRAY = SHARED_DATA / "hep_array.txt.xz"


def add_bench_outage(bench_cmds: Any) -> None:
    """Register ``bench outage`` on the ``mathsearch bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "outage",
        help="index through workers on a 3-node cluster while a node is stopped and restarted",
        description="Bring up a cluster of its own (own ports and state folder, the shared "
        "Redis), index a corpus through real `mathsearch worker` processes into an index "
        "with replicas while searches run at a steady rate, stop one node for a while and "
        "start it again; then check that every equation is searchable exactly once (or "
        "recorded as failed) and report the search error rate and p50/p99 before, during "
        "and after the outage, and equations/s. The cluster is stopped at the end.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench outage                      # all of hep_array, node 2 down 60 s
              mathsearch bench outage --limit 3000 --stop-after 8 --down-for 15 --json
              mathsearch bench outage --processes 4 --scale-down-after 60 --report o.json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "--source", default=None, help=f"corpus (default: {HEP_ARRAY} when present)"
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="items (default: all)")
    parser.add_argument("--nodes", type=positive_int, default=3, help="cluster size (default 3)")
    parser.add_argument("--replicas", type=int, default=1, help="replicas (default 1)")
    parser.add_argument(
        "--processes", type=positive_int, default=2, help="worker processes (default 2)"
    )
    parser.add_argument("--stop-node", type=positive_int, default=2, help="node (default 2)")
    parser.add_argument(
        "--stop-after", type=float, default=30.0, help="s into the job (default 30)"
    )
    parser.add_argument("--down-for", type=float, default=60.0, help="s down (default 60)")
    parser.add_argument("--search-rate", type=float, default=5.0, help="searches/s (default 5)")
    parser.add_argument(
        "--scale-down-after",
        type=float,
        default=0.0,
        help="warm-shutdown half of the workers this many s into the job (default 0: never)",
    )
    parser.add_argument("--port", type=positive_int, default=9220, help="first node's port")
    parser.add_argument("--batch-size", type=positive_int, default=None, help="per task")
    parser.add_argument("--report", help="also write the JSON report here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_bench_outage_command(args: argparse.Namespace) -> int:
    from mathsearch.bench.outage import OutagePlan, run_bench_outage
    from mathsearch.indexer.extract import extract
    from mathsearch.indexer.records import EquationRecord

    source = args.source or (str(HEP_ARRAY) if HEP_ARRAY.is_file() else None)
    if source is None:
        return fail("no corpus: pass --source (hep_array.txt.xz is not beside the repository)")
    if not 1 <= args.stop_node <= args.nodes:
        return fail(f"--stop-node {args.stop_node}: the cluster has nodes 1..{args.nodes}")
    if args.replicas < 1 or args.replicas >= args.nodes:
        return fail("--replicas must be at least 1 and less than --nodes to survive an outage")
    if args.search_rate <= 0:
        return fail("--search-rate must be positive")
    if not Path(source).is_file():
        return fail(f"--source {source}: no such file")
    items = list(itertools.islice(extract([source]), args.limit))
    if not any(isinstance(item, EquationRecord) for item in items):
        return fail(f"no equations in {source}")
    plan = OutagePlan(
        nodes=args.nodes,
        replicas=args.replicas,
        processes=args.processes,
        stop_node=args.stop_node,
        stop_after=args.stop_after,
        down_for=args.down_for,
        search_rate=args.search_rate,
        port=args.port,
        scale_down_after=args.scale_down_after,
        batch_size=args.batch_size,
    )
    report = run_bench_outage(items, plan, progress=not args.json)
    report["source"] = source
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2))
    if args.json:
        emit(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0 if report["ok"] else 1


def _print(report: dict[str, Any]) -> None:
    plan, job, checks = report["plan"], report["job"], report["checks"]
    emit(
        f"{report['equations']} items from {report['source']}, {plan['nodes']} nodes, "
        f"{plan['replicas']} replica(s), {plan['processes']} worker process(es), "
        f"{report['cpus']} CPUs"
    )
    events = ", ".join(f"{k} {v:.1f}" for k, v in report["timeline"].items())
    emit(f"timeline (s): {events}")
    emit(
        f"indexing: {report['indexing_eq_per_s']:.1f} eq/s overall; by phase "
        + ", ".join(f"{k} {v}" for k, v in report["indexing_by_phase"].items())
    )
    emit("searches   n     errors  rate     p50 ms   p99 ms")
    for phase, row in report["searches"].items():
        lat = row["latency_ms"]
        emit(
            f"  {phase:<7} {row['searches']:>5} {row['errors']:>7}  {row['error_rate'] or 0:<7.4f}"
            f" {lat.get('p50', float('nan')):>8.1f} {lat.get('p99', float('nan')):>8.1f}"
        )
    emit(
        f"job: {job['written']} written + {job['failed']} failed of {job['equations']}; "
        f"index: {checks['count']} documents, {checks['distinct_ids']} distinct ids, "
        f"{checks['duplicates']} duplicates, {checks['missing']} missing, "
        f"{checks['sampled_found']}/{checks['sampled_by_id']} sampled found by id"
    )
    emit("OK: every equation searchable exactly once or recorded" if report["ok"] else "FAILED")
