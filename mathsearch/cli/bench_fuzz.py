"""``mathsearch bench fuzz``: the command line of :mod:`mathsearch.bench.fuzz`."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int

__all__ = ["add_bench_fuzz", "run_bench_fuzz_command"]


def add_bench_fuzz(bench_cmds: Any) -> None:
    """Register ``bench fuzz`` on the ``mathsearch bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "fuzz",
        help="bad input at scale: generated and mutated real inputs through the whole pipeline",
        description="Generate --inputs inputs (seeded; real hep-th / ARQMath / NTCIR equations "
        "mutated, XML bombs, external entities, deep nesting, huge and invalid-UTF-8 inputs) "
        "in every source format, run each through extract -> parse -> embed (gcn ONNX) -> "
        "write into a fresh OpenSearch index (inline, no broker) under a watchdog, and account "
        "for every input by id: each equation it yields is a document of the index or a "
        "failure record with a reason. Exit status 1 when anything crashed, hung or is "
        "unaccounted. Needs the OpenSearch node (`mathsearch stack up`).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench fuzz --inputs 3000
              mathsearch bench fuzz --inputs 100000 --runners 2 --report fuzz.json
              mathsearch bench fuzz --inputs 500 --formats jats,jsonl --seed 7 --json
              mathsearch bench fuzz --replay 1234 --seed 7 --keep     (one input again)
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("--inputs", type=positive_int, default=3000, help="inputs (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    parser.add_argument(
        "--formats",
        default="latex,tex,jats,jsonl,hepth",
        help="comma-separated, taken in turn (default latex,tex,jats,jsonl,hepth)",
    )
    parser.add_argument("--index", help="index alias to write (default: a fresh random name)")
    parser.add_argument("--keep", action="store_true", help="keep the index and failure records")
    parser.add_argument(
        "--runners", type=positive_int, default=1, help="runner processes (default 1)"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=256, help="equations per embed/write batch"
    )
    parser.add_argument(
        "--input-timeout", type=float, default=60.0, help="seconds before an input is a hang"
    )
    parser.add_argument(
        "--batch-timeout", type=float, default=300.0, help="seconds before a batch is a hang"
    )
    parser.add_argument("--replay", type=int, action="append", help="run only this input number")
    parser.add_argument("--data-dir", help="real data (default ../shared/data)")
    parser.add_argument("--report", help="also write the JSON report here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_bench_fuzz_command(args: argparse.Namespace) -> int:
    from mathsearch.bench.fuzz import FuzzRun, run_bench_fuzz
    from mathsearch.bench.fuzz_inputs import FORMATS
    from mathsearch.opensearch.client import connect

    formats = tuple(f for f in args.formats.split(",") if f)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        return fail(f"--formats {args.formats!r}: use some of {','.join(FORMATS)}")
    if args.input_timeout <= 0 or args.batch_timeout <= 0:
        return fail("--input-timeout and --batch-timeout must be positive")
    run = FuzzRun(
        inputs=args.inputs,
        seed=args.seed,
        formats=formats,
        batch_size=args.batch_size,
        input_timeout=args.input_timeout,
        batch_timeout=args.batch_timeout,
        data_dir=args.data_dir,
        numbers=args.replay,
        runners=args.runners,
    )
    report = run_bench_fuzz(
        run, connect(), index=args.index, keep=args.keep, progress=not args.json
    )
    if args.report:
        write_report(report, args.report)
    if args.json:
        emit(json.dumps(report, indent=2, default=str))
    else:
        emit("\n".join(report_lines(report)))
    bad = report["crashes"] + report["hangs"] + report["unaccounted"] + report["extra_ids"]
    return 1 if bad or report["empty_reasons"] else 0


def report_lines(report: dict[str, Any]) -> list[str]:
    """The human-readable summary of a report."""
    t = report["seconds_per_input"]
    lines = [
        f"{report['inputs']} inputs (seed {report['seed']}, {','.join(report['formats'])}) in "
        f"{report['seconds']} s = {report['inputs_per_s']} inputs/s on {report['cpus']} CPUs",
        f"equations {report['equations']}: indexed {report['indexed']}, "
        f"failure records {report['failed']}",
        f"crashes {report['crashes']}  hangs {report['hangs']}  unaccounted "
        f"{report['unaccounted']}  extra ids {report['extra_ids']}  empty reasons "
        f"{report['empty_reasons']}",
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(report["outcomes"].items())),
        f"per input: p50 {t.get('p50')} s, p99 {t.get('p99')} s, max {t.get('max')} s; "
        f"CPU {report['cpu_ms_per_input']} ms/input; "
        f"peak RSS runner {report['peak_rss_mb']['runner']} MB",
        "top failure reasons: "
        + ", ".join(f"{k} {v}" for k, v in list(report["failure_reasons"].items())[:12]),
    ]
    for crash in report["crash_samples"][:3]:
        lines.append(f"CRASH input {crash['number']} ({crash['stage']}): {crash['trace'][-300:]}")
    for hang in report["hang_samples"][:3]:
        lines.append(f"HANG input {hang['number']} ({hang['stage']}): {hang['why']}")
    return lines


def write_report(report: dict[str, Any], path: str | Path) -> None:
    """The report as JSON in ``path``."""
    Path(path).write_text(json.dumps(report, indent=2, default=str))
