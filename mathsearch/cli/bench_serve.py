"""``mathsearch bench serve`` and ``mathsearch bench fuzz-api`` (parsing and output); the work
is in :mod:`mathsearch.bench.serve` and :mod:`mathsearch.bench.fuzz_api`."""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from collections.abc import Mapping
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit_report, fail, positive_int
from mathsearch.opensearch.queries import Mode

logger = logging.getLogger(__name__)

__all__ = ["add_bench_fuzz_api", "add_bench_serve", "run_bench_fuzz_api", "run_bench_serve"]

_MODES = ("default", "mix", "hybrid", *(mode.value for mode in Mode))


def _rates(text: str) -> list[float]:
    """``"10,20,40"`` -> ``[10.0, 20.0, 40.0]`` (positive rates)."""
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"rates must be numbers, not {text!r}") from None
    if not rates or min(rates) <= 0:
        raise argparse.ArgumentTypeError(f"rates must be positive, not {text!r}")
    return rates


def add_bench_serve(bench_cmds: Any) -> None:
    """Register ``bench serve`` on the ``bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "serve",
        help="`mathsearch serve` under concurrent load from another process: queries/s, "
        "p50/p99, status counts, error and shed rates, CPU per query",
        description="Start `mathsearch serve` in its own process (or target one at --url) and "
        "load it from this process over loopback: CLIENTS closed-loop clients post real "
        "formula queries to /search for DURATION seconds. By default each request runs the "
        "server's search profile (the shipped default: first stage and second stage), and no "
        "query is sent twice while the pool lasts (the ARQMath / NTCIR topics, then the "
        "shared hep-th equations in a fixed random order; the report counts repeats). Reports "
        "queries/s, latency percentiles, answers by status, the error rate ((5xx + connection "
        "errors) / sent) and the shed rate ((429 + 503) / sent), /health before and after, "
        "and the CPU milliseconds each answered query cost the server's processes, the "
        "OpenSearch nodes on this machine and the load generator, with the queries/s at which "
        "the server and OpenSearch alone would keep every core busy (the ceiling). "
        "A spawned server gets one API key per client by default, so each client has its own "
        "rate-limit bucket; --rate 0 turns the limit off to see 503 shedding and the most "
        "the server does. The index: --index, else <prefix>-equations or "
        "<prefix>-demo-equations, else the bundled demo corpus is indexed first.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench serve --clients 10 --duration 10          quick run
              mathsearch bench serve --rates 10,25,50,100 --duration 20 --workers auto
              mathsearch bench serve --equations ../shared/data/hepth2003/eqnarray.txt
              mathsearch bench serve --clients 50 --duration 60 --report serve-rate.json
              mathsearch bench serve --clients 50 --duration 60 --rate 0 --inflight 8
              mathsearch bench serve --url http://127.0.0.1:8080 --api-key "$KEY" --json
              mathsearch bench serve --mode bm25 --queries my-topics.txt
              mathsearch bench serve --mode hybrid --rates 10,20,40,80,100 --duration 20
              mathsearch bench serve --mode hybrid --rates 10,20,40 --workers auto
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("--url", help="load a running server instead of starting one")
    parser.add_argument("--index", help="equation alias a spawned server serves")
    parser.add_argument("--clients", type=positive_int, default=50, help="concurrent clients (50)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (60)")
    parser.add_argument(
        "--mode", choices=_MODES, default="default",
        help="default: the server's search profile, as a user's request without a mode "
        "(default); mix: every mode in turn; hybrid: those with BM25 and vectors; or one mode",
    )  # fmt: skip
    parser.add_argument(
        "--rates", metavar="R1,R2", type=_rates,
        help="open loop instead of --clients: DURATION seconds at each offered rate (queries/s), "
        "lowest first; reports the capacity, the highest rate held with no error, nothing shed "
        "and p99 <= --p99-ms",
    )  # fmt: skip
    parser.add_argument(
        "--p99-ms", type=float, default=100.0, help="latency bound of the capacity (100 ms)"
    )
    parser.add_argument("--k", type=positive_int, default=10, help="hits per query (10)")
    parser.add_argument(
        "--queries", metavar="FILE", action="append", help="topic file(s) ID<TAB>LaTeX "
        "(default: ../shared/data/mathir-topics/*.txt, then the equations of --equations)",
    )  # fmt: skip
    parser.add_argument(
        "--equations", metavar="SOURCE", action="append", help="more queries, each once: the "
        "unique equations of these sources in a fixed random order (default: "
        "../shared/data/hepth2003/equation.txt when there and no --queries)",
    )  # fmt: skip
    parser.add_argument(
        "--format", dest="fmt", help="format of --equations (default: from the file name)"
    )
    parser.add_argument(
        "--keys", choices=("per-client", "shared", "none"), default="per-client",
        help="API keys of a spawned server: one per client (default), one shared, or no auth",
    )  # fmt: skip
    parser.add_argument("--api-key", help="the key for --url (default: none)")
    parser.add_argument(
        "--rate", type=float, help="spawned server's requests/s per client (0: off)"
    )
    parser.add_argument("--burst", type=positive_int, help="spawned server's burst")
    parser.add_argument("--inflight", type=positive_int, help="spawned server's in-flight bound")
    parser.add_argument("--queue-timeout", type=float, help="spawned server's queue wait, s")
    parser.add_argument(
        "--workers", metavar="N", help="spawned server's processes (auto: one per core; 1)"
    )
    parser.add_argument("--report", metavar="JSON", help="also write the JSON report here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_bench_serve(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch bench serve``."""
    from mathsearch.bench.serve import bench_queries, bench_serve
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.indexer.errors import IndexerError

    if args.duration <= 0:
        return fail(f"--duration must be positive, not {args.duration}")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    try:
        queries = None
        if args.queries or args.equations:
            queries = bench_queries(
                args.queries or [], equations=args.equations or (), fmt=args.fmt
            )
            if not queries:
                given = [*(args.queries or []), *(args.equations or [])]
                return fail(f"no queries in {', '.join(given)}")
        report = bench_serve(
            url=args.url, index=args.index, clients=args.clients, duration=args.duration,
            mode=args.mode, queries=queries, keys=args.keys, api_key=args.api_key,
            rate=args.rate, burst=args.burst, inflight=args.inflight,
            queue_timeout=args.queue_timeout, k=args.k, rates=args.rates, p99_ms=args.p99_ms,
            workers=args.workers,
        )  # fmt: skip
    except (IndexerError, MathsearchOpenSearchError, OSError, ValueError) as exc:
        return fail(str(exc))
    emit_report(args, report, format_bench_serve)
    return 0


def format_bench_serve(report: Mapping[str, Any]) -> str:
    """The report as a few readable lines."""
    load, server = report["load"], report["server"]
    ok, every = load["latency_ms_ok"], load["latency_ms_all"]
    limits = report.get("settings", {})

    def triple(stats: Mapping[str, Any]) -> str:
        if not stats.get("n"):
            return "-"
        return f"p50 {stats['p50']} / p90 {stats['p90']} / p99 {stats['p99']} / max {stats['max']}"

    before, after = report["health_before"], report["health_after"]
    ladder = [
        f"offered  {row['offered_per_s']:g}/s -> {row['queries_per_s']} q/s, p99 "
        f"{row['latency_ms_all'].get('p99', '-')} ms, errors {row['error_rate']}, shed "
        f"{row['shed_rate']}{cpu_brief(row.get('cpu'))}: {'held' if row['meets'] else 'missed'}"
        for row in report.get("ladder", [])
    ]
    if "ladder" in report:
        held = report.get("capacity_per_s")
        ladder.append(
            f"capacity {held:g} queries/s at p99 <= {report['p99_bound_ms']:g} ms"
            if held
            else f"capacity none of the offered rates held p99 <= {report['p99_bound_ms']:g} ms"
        )
    load_line = (
        f"load     open loop, the highest rate held ({load.get('offered_per_s')}/s) below"
        if "ladder" in report
        else f"load     {load['clients']} clients x {load['duration_s']} s, modes "
        f"{','.join(load['modes'])}"
    )
    repeated = sum(row.get("repeated", 0) for row in report.get("ladder", [])) or load.get(
        "repeated", 0
    )
    return "\n".join([*ladder,
        f"server   {server['url']} ({'spawned' if server['spawned'] else 'given'}"
        f"{', index ' + server['index'] if server.get('index') else ''}; "
        f"keys {server.get('keys', '?')}; cpus {report['machine']['cpu_count']})",
        f"limits   rate {limits.get('rate_per_s')}/s burst {limits.get('burst')}, in flight "
        f"{limits.get('max_inflight')}, queue wait {limits.get('queue_timeout_s')} s",
        load_line,
        f"queries  {report['queries']['count']} distinct ({report['queries']['source']}); "
        f"{repeated} requests repeated a query",
        f"sent     {load['sent']}  completed {load['completed']}  ok {load['ok']}  "
        f"-> {load['queries_per_s']} queries/s ({load['answers_per_s']} answers/s)",
        f"200s ms  {triple(ok)}",
        f"all ms   {triple(every)}",
        f"status   {json.dumps(load['by_status'])}  connection errors "
        f"{load['connection_errors']}  timeouts {load['timeouts']}",
        f"rates    error {load['error_rate']}  shed {load['shed_rate']}",
        f"health   before {before.get('http_status')} {before.get('load', '')}  after "
        f"{after.get('http_status')} {after.get('load', '')}",
        *cpu_lines(load.get("cpu"), report["machine"]["cpu_count"]),
    ])  # fmt: skip


def cpu_brief(cpu: Mapping[str, Any] | None) -> str:
    """A ladder row's CPU: the cores' busy share.

    >>> cpu_brief({"ms": {"server": 10.0, "opensearch": 9.0, "load": 1.0}, "busy": 0.5})
    ', cores 50% busy'
    >>> cpu_brief(None)
    ''
    """
    if not cpu or cpu.get("busy") is None:
        return ""
    return f", cores {cpu['busy']:.0%} busy"


def cpu_lines(cpu: Mapping[str, Any] | None, cores: int | None) -> list[str]:
    """The CPU each answered query cost, by group, and the ceiling it sets (none when the run
    measured nothing).

    >>> print("\\n".join(cpu_lines({"ms": {"server": 11.1, "opensearch": 9.8, "load": 1.6},
    ...     "busy": 0.45, "ceiling_per_s": 95.7}, 2)))
    cpu      a query: server 11.1 ms + OpenSearch 9.8 ms (+ load generator 1.6 ms); 2 cores 45% busy
    ceiling  95.7 queries/s would keep the 2 cores fully busy (server + OpenSearch alone)
    """
    if not cpu:
        return []
    ms = cpu["ms"]
    names = {"server": "server", "opensearch": "OpenSearch"}
    parts = [f"{names[g]} {ms[g]:g} ms" for g in names if ms.get(g) is not None]
    load = f" (+ load generator {ms['load']:g} ms)" if ms.get("load") is not None else ""
    busy = f"; {cores} cores {cpu['busy']:.0%} busy" if cpu.get("busy") is not None else ""
    lines = [f"cpu      a query: {' + '.join(parts) or '-'}{load}{busy}"]
    if cpu.get("ceiling_per_s"):
        lines.append(
            f"ceiling  {cpu['ceiling_per_s']:g} queries/s would keep the {cores} cores fully "
            f"busy ({' + '.join(names[g] for g in names if ms.get(g) is not None)} alone)"
        )
    return lines


def add_bench_fuzz_api(bench_cmds: Any) -> None:
    """Register ``bench fuzz-api`` on the ``bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "fuzz-api",
        help="N generated and mutated requests through the API in-process: 5xx / crashes = 0",
        description="Mutate real formula queries (byte flips, truncation, inserted JSON / "
        "Lucene / painless specials, deep nesting, invalid UTF-8, huge inputs, wrong types, "
        "huge numbers, random content types and methods) into requests for /search, /render, "
        "/equations/ID and the operations routes, and send them through the API app in this "
        "process against the configured node (rate limit off). Counts answers by status and "
        "crashes: an exception, a 5xx other than 503, or an error answer without a JSON "
        "reason. Exit status 1 when there is a crash.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench fuzz-api --inputs 2000
              mathsearch bench fuzz-api --inputs 100000 --seed 7 --report fuzz.json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("--inputs", type=positive_int, default=100_000, help="requests (100000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--index", help="equation alias (default: as bench serve picks it)")
    parser.add_argument("--report", metavar="JSON", help="also write the JSON report here")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_bench_fuzz_api(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch bench fuzz-api``."""
    from dataclasses import replace

    from mathsearch.bench.fuzz_api import fuzz_api
    from mathsearch.bench.serve import bench_queries, ensure_bench_index
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.settings import OpenSearchSettings
    from mathsearch.serve.http_api import create_app

    try:
        settings = OpenSearchSettings.from_env()
        client = connect(settings)
        alias, how = ensure_bench_index(client, settings, args.index)
        app = create_app(replace(settings, serve_rate=0), alias, client=client)
        report = fuzz_api(
            app, inputs=args.inputs, seeds=bench_queries(), seed=args.seed,
            max_latex=settings.serve_max_latex, progress=not args.no_progress,
        )  # fmt: skip
    except (MathsearchOpenSearchError, OSError, ValueError) as exc:
        return fail(str(exc))
    report = {"index": alias, "index_from": how, **report}
    emit_report(args, report, format_fuzz_api)
    return 1 if report["crashes"] else 0


def format_fuzz_api(report: Mapping[str, Any]) -> str:
    lines = [
        f"fuzz-api {report['inputs']} inputs (seed {report['seed']}) on {report['index']}: "
        f"{report['crashes']} crashes, {report['requests_per_s']} requests/s",
        f"status   {json.dumps(report['by_status'])}",
        f"kinds    {json.dumps(report['by_kind'])}",
        f"latency  ms {json.dumps(report['latency_ms'])}",
    ]
    lines += [f"crash    {json.dumps(example)}" for example in report["crash_examples"]]
    return "\n".join(lines)
