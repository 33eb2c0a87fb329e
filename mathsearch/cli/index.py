"""``mathsearch index`` and ``mathsearch worker`` (command-line parsing and output)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.core.paths import SHARED_DATA
from mathsearch.workers.queues import QUEUES

__all__ = [
    "add_bench_index",
    "add_delete",
    "add_failures",
    "add_index",
    "add_worker",
    "run_bench_index_command",
    "run_delete_command",
    "run_failures_command",
    "run_index_command",
    "run_worker",
]


def add_index(commands: Any) -> None:
    """Register ``index`` on the ``mathsearch`` subparsers."""
    from mathsearch.indexer.extract import FORMATS

    parser = commands.add_parser(
        "index",
        help="extract, parse, embed and write a source's equations (Celery workers or inline)",
        description="Read every equation of the sources (LaTeX files and arXiv tarballs, hep-th "
        "record files, JSONL, JATS XML, or a library's OpenSearch index), cut them into batches "
        "and send them through the workers: parse (queue `parse`), embed with the ONNX model "
        "and write (queue `embed`) into the equation index behind the alias --index. Enqueuing "
        "waits while too many batches wait in the queues. A source that is an OpenSearch index "
        "is also enriched: its documents get `math.*` fields by partial updates. Failed "
        "equations go to the failures index with their stage and reason. Re-running a job "
        "changes nothing that is already indexed.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch worker --concurrency 2 &        (once; or several, or in Kubernetes)
              mathsearch index ../shared/data/hepth2003/equation.txt --index hepth
              mathsearch index papers/ arxiv/0301004.tar.gz --index library-equations
              mathsearch index articles/ --format jats --index jats --inline
              mathsearch index papers --format opensearch --field body --mode text --index papers-eq
              mathsearch index eq.jsonl --index eq --batch-size 64 --max-queued 8 --json
              mathsearch index eq.jsonl --index eq --encoders gcn,bitmap,seq2seq
              mathsearch index eq.jsonl --index eq --encoders gcn,models/gcn-v2.onnx --inline
              mathsearch index revised/ --index library-equations --prune
              mathsearch index eq.jsonl --index eq --no-rerank     kNN field alone (fast)

            --prune: a revised document keeps the ids of the positions it still has and would
            keep the ones it lost; with --prune the job then removes, for each document it
            read, the equations and failure records it did not produce. A document that could
            not be read as a whole keeps its equations. Give every source of a document in one
            run (hep-th's equation.txt and eqnarray.txt). Withdrawn documents: mathsearch delete.

            With several --encoders every equation gets one vector field per encoder (the
            first is the primary: its refusal fails the equation; another's is recorded in the
            document's embed_refusals). The workers must serve the same encoders.

            The second stage's fields: every job also writes the default search profile's
            rerank encoders (gcn-v9.int8, gcn-v10.int8; MATHSEARCH_RERANK_ENCODERS) as exact-only
            fields - float16 bytes, no ANN graph (MATHSEARCH_RERANK_STORAGE) - so that a
            search reads the candidates' vectors instead of embedding them. They cost most of
            the embedding time; --no-rerank leaves them out (searches then embed the window's
            candidates at query time and say so), `mathsearch models add MODEL --rerank`
            fills one later on the live index.
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("sources", nargs="+", metavar="SRC", help="files, folders or index names")
    _add_encoders(parser, "encoders whose vector fields the job writes")
    second = parser.add_mutually_exclusive_group()
    second.add_argument(
        "--rerank",
        metavar="E1,E2",
        default=None,
        help="the second stage's encoders, written as exact-only fields (default "
        "MATHSEARCH_RERANK_ENCODERS, else the default search profile's rerank)",
    )
    second.add_argument(
        "--no-rerank", action="store_true", help="write no second-stage field (kNN fields only)"
    )
    _add_index_alias(parser)
    parser.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    parser.add_argument("--inline", action="store_true", help="run in this process, no broker")
    parser.add_argument(
        "--workers", action="store_true", help="use the Celery workers (the default)"
    )
    parser.add_argument("--batch-size", type=int, help="equations per task (MATHSEARCH_BATCH_SIZE)")
    parser.add_argument(
        "--max-queued", type=int, help="batches waiting in the queues before enqueuing pauses"
    )
    parser.add_argument("--field", default="latex", help="opensearch source: the field to read")
    parser.add_argument(
        "--mode",
        choices=["latex", "text"],
        default="latex",
        help="opensearch source: the field holds LaTeX or full text (default latex)",
    )
    parser.add_argument("--id-field", help="opensearch source: document id field (default _id)")
    parser.add_argument("--no-enrich", action="store_true", help="opensearch source: no math.*")
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=600.0,
        help="give up waiting after this many seconds without progress (default 600)",
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="after the job, remove the equations of the documents read that it did not produce "
        "(revised documents)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _add_index_alias(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index",
        default=None,
        help="equation index alias (default: MATHSEARCH_INDEX_PREFIX + '-equations')",
    )


def add_delete(commands: Any) -> None:
    """Register ``delete`` on the ``mathsearch`` subparsers."""
    parser = commands.add_parser(
        "delete",
        help="remove documents' equations and failure records from an equation index",
        description="Remove every equation of the given documents (withdrawn papers) from the "
        "equation index behind --index, and their failure records. Idempotent: removing a "
        "document that is not there removes nothing. The library's own documents are not "
        "changed; the figures index only with --figures.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch delete 0301001 0301004 --index library-equations
              mathsearch delete --ids-from withdrawn.txt --index library-equations --json
              mathsearch delete 0301001 --index library-equations --figures   (+ their figures)

            A revised document is re-indexed with `mathsearch index SRC --prune`, which also
            removes the equations it no longer has.
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("doc_ids", nargs="*", metavar="DOC_ID", help="document ids")
    parser.add_argument(
        "--figures",
        nargs="?",
        const="",
        metavar="NAME",
        help="also remove the documents' figures and their failure records from the figures "
        "index (default NAME: MATHSEARCH_INDEX_PREFIX + '-figures')",
    )
    parser.add_argument(
        "--ids-from", metavar="FILE", help="also the document ids in FILE, one a line ('-': stdin)"
    )
    _add_index_alias(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_delete_command(args: argparse.Namespace) -> int:
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.document_removal import remove_equations
    from mathsearch.opensearch.figure_search import figures_alias
    from mathsearch.opensearch.schema import equations_alias, failures_index_name
    from mathsearch.opensearch.settings import OpenSearchSettings

    doc_ids = list(args.doc_ids)
    if args.ids_from:
        try:
            text = sys.stdin.read() if args.ids_from == "-" else Path(args.ids_from).read_text()
        except OSError as exc:
            return fail(f"--ids-from: {exc}")
        doc_ids += [line.strip() for line in text.splitlines() if line.strip()]
    if not doc_ids:
        return fail("no document ids: give DOC_ID arguments or --ids-from FILE")
    settings = OpenSearchSettings.from_env()
    alias = equations_alias(settings, args.index)
    try:
        client = connect(settings)
        if not client.indices.exists(index=alias):
            return fail(f"no equation index {alias} (see --index)")
        figures = None if args.figures is None else figures_alias(settings, args.figures or None)
        if figures is not None and not client.indices.exists(index=figures):
            return fail(f"no figures index {figures} (see --figures NAME)")
        failures = failures_index_name(settings)  # none yet: nothing removed there
        report = remove_equations(client, alias, failures, doc_ids, settings=settings)
        removed = {"index": alias, **report.to_dict()}
        if figures is not None:
            of_figures = remove_equations(client, figures, failures, doc_ids, settings=settings)
            counts = of_figures.to_dict()
            removed["figures"] = {
                "index": figures,
                "figures": counts["equations"],
                "failure_records": counts["failure_records"],
            }
    except MathsearchOpenSearchError as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(removed, indent=2))
        return 0
    emit(
        f"removed {report.equations} equations and {report.failure_records} failure "
        f"records of {report.documents} documents from {alias}"
    )
    if figures is not None:
        emit(
            f"removed {of_figures.equations} figures and {of_figures.failure_records} failure "
            f"records from {figures}"
        )
    return 0


def add_failures(commands: Any) -> None:
    """Register ``failures`` on the ``mathsearch`` subparsers."""
    parser = commands.add_parser(
        "failures",
        help="what failed for an equation index: counts by stage and reason, and the records",
        description="Count the failure records of the equation index behind --index by stage "
        "and reason, and list the most recent ones (equation id, stage, reason, detail, the "
        "start of the equation). Filters narrow both. Re-running the job after a fix indexes "
        "what now goes through and removes its records.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch failures --index library-equations
              mathsearch failures --index library-equations --reason unknown-environment --limit 5
              mathsearch failures --index library-equations --stage extract --json
              mathsearch failures --index library-equations --doc 0301004 --limit 0
            """),
        formatter_class=RAW_HELP,
    )
    _add_index_alias(parser)
    parser.add_argument(
        "--stage", help="only this stage (extract, convert, graph, tokens, embed, write, ...)"
    )
    parser.add_argument("--reason", help="only this reason code (e.g. unbalanced-braces)")
    parser.add_argument("--doc", help="only this document id")
    parser.add_argument(
        "--limit", type=int, default=20, help="records to list, most recent first (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run_failures_command(args: argparse.Namespace) -> int:
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.failure_report import failure_summary
    from mathsearch.opensearch.schema import equations_alias, failures_index_name
    from mathsearch.opensearch.settings import OpenSearchSettings

    if args.limit < 0:
        return fail("--limit must be 0 or more")
    settings = OpenSearchSettings.from_env()
    alias = equations_alias(settings, args.index)
    try:
        client = connect(settings)
        summary = failure_summary(
            client,
            failures_index_name(settings),
            alias,
            stage=args.stage,
            reason=args.reason,
            doc_id=args.doc,
            limit=args.limit,
        )
        if not summary.total and not client.indices.exists(index=alias):
            return fail(f"no equation index {alias} (see --index)")
    except MathsearchOpenSearchError as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(summary.to_dict(), indent=2))
        return 0
    emit(f"{summary.total} failure records for {alias}")
    for stage, reasons in sorted(summary.by_stage.items()):
        counts = ", ".join(f"{reason} {n}" for reason, n in reasons.items())
        emit(f"  {stage}: {counts}")
    for record in summary.records:
        detail = " ".join(str(record.get("detail") or "").split())[:100]
        emit(f"{record['eq_id']}  {record['stage']}/{record['reason']}  {detail}")
        if record.get("excerpt"):
            emit(f"    {record['excerpt']}")
    return 0


def add_worker(commands: Any) -> None:
    """Register ``worker`` on the ``mathsearch`` subparsers."""
    worker = commands.add_parser(
        "worker",
        help="start a Celery worker (parse and embed queues)",
        description="Start a Celery worker on the Redis broker of MATHSEARCH_REDIS_URL. Each "
        "pool process loads the featuriser and the ONNX session (MATHSEARCH_MODEL on "
        "MATHSEARCH_EMBED_DEVICE) once. SIGTERM is a warm shutdown: running batches finish, "
        "waiting ones stay in Redis. SIGUSR2 makes a process write its threads' stacks to "
        "stderr and carry on (send it to the main process and its pool children). Prometheus "
        "metrics are served on --metrics-port.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch worker                               parse + embed, one process per CPU
              mathsearch worker --queues parse --concurrency 4
              MATHSEARCH_EMBED_DEVICE=cuda mathsearch worker --queues embed --concurrency 1
              mathsearch worker --autoscale 4,1 --metrics-port 9809
              mathsearch worker --encoders gcn,bitmap,seq2seq   one session each per process
            """),
        formatter_class=RAW_HELP,
    )
    _add_encoders(worker, "encoders this worker serves (each loaded once per pool process)")
    worker.add_argument(
        "--queues", default=",".join(QUEUES), help="comma-separated queues (default: %(default)s)"
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="pool processes (default MATHSEARCH_WORKER_CONCURRENCY, else the CPU count)",
    )
    worker.add_argument(
        "--autoscale", metavar="MAX,MIN", help="grow the pool up to MAX processes under load"
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="Prometheus /metrics port (default MATHSEARCH_METRICS_PORT, 9808; 0: none)",
    )
    worker.add_argument("--loglevel", default="INFO")
    worker.add_argument("--hostname", default=None, help="Celery node name (default: celery@host)")


def _add_encoders(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--encoders",
        metavar="E1,E2",
        default=None,
        help=f"{what}: families (gcn, bitmap, seq2seq, figure) or .onnx paths, the primary "
        "first (default MATHSEARCH_ENCODERS, else gcn)",
    )


def check_encoders(spec: str | None) -> list[str] | None:
    """``--encoders`` parsed, every model's card read (a missing model fails here, not in a
    pool process); ``None`` when not given.

    Raises:
        ModelCardError: an unknown name, or a model or card that is not there.
    """
    if spec is None:
        return None
    from mathsearch.runtime.embedders import encoder_card, parse_encoders

    names = parse_encoders(spec)
    for name in names:
        encoder_card(name)
    return names


def run_index_command(args: argparse.Namespace) -> int:
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.export.errors import ExportError, ModelCardError
    from mathsearch.indexer.errors import IndexerError
    from mathsearch.indexer.extract import SourceError, check_sources, extract
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.schema import equations_alias
    from mathsearch.opensearch.settings import OpenSearchSettings
    from mathsearch.workers.index_job import run_index

    if args.inline and args.workers:
        return fail("--inline and --workers exclude each other")
    try:
        encoders = check_encoders(getattr(args, "encoders", None))
    except (ModelCardError, ExportError) as exc:
        return fail(f"--encoders: {exc}")
    try:
        rerank = [] if args.no_rerank else check_encoders(args.rerank)
    except (ModelCardError, ExportError) as exc:
        return fail(f"--rerank: {exc}")
    try:  # a missing or unreadable source stops the job before anything is written
        check_sources(args.sources, args.format)
    except IndexerError as exc:
        return fail(f"cannot index {exc}" if isinstance(exc, SourceError) else str(exc))
    settings = OpenSearchSettings.from_env()
    alias = equations_alias(settings, args.index)
    items = extract(
        args.sources,
        args.format,
        field=args.field,
        mode=args.mode,
        id_field=args.id_field,
        client=connect(settings) if args.format == "opensearch" else None,
    )
    enrich = None
    if args.format == "opensearch" and not args.no_enrich:
        if len(args.sources) != 1:
            return fail("enrichment reads one OpenSearch index at a time (or pass --no-enrich)")
        enrich = args.sources[0]
    try:
        report = run_index(
            items,
            alias,
            inline=args.inline,
            enrich_index=enrich,
            settings=settings,
            batch_size=args.batch_size,
            max_queued=args.max_queued,
            stall_timeout=args.stall_timeout,
            progress=not args.json and sys.stderr.isatty(),
            encoders=encoders,
            rerank=rerank,
            prune=args.prune,
        )
    except (ModelCardError, ExportError, MathsearchOpenSearchError) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(report.to_dict(), indent=2))
    else:
        stages = ", ".join(f"{n} {stage}" for stage, n in sorted(report.failures_by_stage.items()))
        emit(
            f"indexed {report.written} of {report.equations} equations into {report.index} "
            f"in {report.seconds:.1f} s ({report.eq_per_s:.0f} equations/s, {report.mode}, "
            f"{report.batches} batches); failure records: {report.failed}"
            + (f" ({stages})" if stages else "")
        )
        if len(report.vector_fields) > 1:
            refused = ", ".join(f"{k} {v}" for k, v in report.refusals.items()) or "none"
            emit(f"vector fields {', '.join(report.vector_fields)}; refused: {refused}")
        if report.enriched_index:
            emit(f"enriched the documents of {report.enriched_index} with math.*")
        if report.stage_seconds:
            busy = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(report.stage_seconds.items()))
            emit(f"time in the stages (all processes): {busy}")
        if report.lost_batches:
            emit(f"batches given up after their retries: {', '.join(report.lost_batches)}")
        if report.resent_batches:
            emit(f"batches sent again (the broker lost them): {', '.join(report.resent_batches)}")
        if report.pruned is not None:
            emit(_pruned_line(report.pruned))
    if report.missing_batches:
        return fail(
            f"{len(report.missing_batches)} batches did not finish "
            f"(first: {', '.join(report.missing_batches[:5])}); are the workers running?"
        )
    return 0


def _pruned_line(pruned: dict[str, Any]) -> str:
    if "skipped" in pruned:
        return f"pruning skipped: {pruned['skipped']}"
    line = (
        f"pruned {pruned['equations']} equations and {pruned['failure_records']} failure "
        f"records that the {pruned['documents']} documents read no longer have"
    )
    if pruned["kept_unreadable"]:
        kept = pruned["kept_unreadable"]
        line += f"; kept {len(kept)} unreadable documents as they were ({', '.join(kept[:3])})"
    return line


def run_worker(args: argparse.Namespace) -> int:
    from mathsearch.core.errors import ConfigurationError
    from mathsearch.export.errors import ExportError, ModelCardError
    from mathsearch.workers.settings import WorkerSettings

    try:
        encoders = check_encoders(getattr(args, "encoders", None))
        if encoders is not None:  # the pool's processes read it when they load their models
            os.environ["MATHSEARCH_ENCODERS"] = ",".join(encoders)
        settings = WorkerSettings.from_env()
        check_encoders(",".join(settings.served))  # the second stage's encoders too
    except (ModelCardError, ExportError, ConfigurationError) as exc:
        return fail(f"--encoders: {exc}")
    port = settings.metrics_port if args.metrics_port is None else args.metrics_port
    folder = None
    if port and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # before prometheus_client is imported: the pool's processes share their counters there
        if "prometheus_client" in sys.modules:
            return fail("prometheus_client was imported before the worker set up its metrics")
        folder = Path(tempfile.mkdtemp(prefix="mathsearch-metrics-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    import redis

    from mathsearch.workers.app import app
    from mathsearch.workers.health import install_stack_dump
    from mathsearch.workers.queues import QUEUES as NAMES
    from mathsearch.workers.shutdown_watchdog import install_shutdown_watchdog

    queues = [settings.queue(name) if name in NAMES else name for name in args.queues.split(",")]
    concurrency = args.concurrency or settings.concurrency
    if not os.environ.get("MATHSEARCH_EMBED_THREADS"):
        # one ONNX Runtime thread pool per process, sized so the pool does not oversubscribe
        top = int(args.autoscale.split(",")[0]) if args.autoscale else concurrency
        os.environ["MATHSEARCH_EMBED_THREADS"] = str(max(1, (os.cpu_count() or 1) // top))
    argv = ["worker", f"--queues={','.join(queues)}", f"--loglevel={args.loglevel}"]
    pool = f"--autoscale={args.autoscale}" if args.autoscale else f"--concurrency={concurrency}"
    argv.append(pool)
    if args.hostname:
        argv.append(f"--hostname={args.hostname}")
    if port:
        from mathsearch.workers import metrics

        try:
            metrics.serve(port, redis.Redis.from_url(settings.redis_url), queues)
        except OSError as exc:
            return fail(f"metrics port {port} is taken ({exc}): pass --metrics-port")
    install_stack_dump()  # before Celery redirects stderr to its logger and forks the pool
    install_shutdown_watchdog()  # a warm shutdown ends even if a pool process misses its stop
    try:
        app.worker_main(argv)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def add_bench_index(bench_cmds: Any) -> None:
    """Register ``bench index`` on the ``mathsearch bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "index",
        help="equations/s from LaTeX to searchable: inline, 1/2/4 worker processes, pya0",
        description="Index the same real equations with each stage alone (parse, embed, "
        "write: the limits on this machine, over every field the workers write - the kNN "
        "encoders' and the second stage's, each encoder's embedding rate apart), end to end "
        "inline and through `mathsearch worker` with 1, 2 and 4 pool processes (each into a "
        "fresh index, until it is searchable), and with Approach Zero (pya0) on the same "
        "disk; report equations/s, where the time goes and the ratio. Needs the stack up and "
        "pya0 (the `bench` extra).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench index
              mathsearch bench index --limit 1000 --processes 1,2 --json
              mathsearch bench index --source eq.jsonl --pya0-dir /dev/shm/pya0 --report b.json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "--source",
        default=None,
        help="equations to index (default: ../shared/data/hepth2003/equation.txt when present, "
        "else the bundled sample)",
    )
    parser.add_argument("--limit", type=int, default=3000, help="equations (default 3000)")
    parser.add_argument("--processes", default="1,2,4", help="worker pool sizes (default 1,2,4)")
    parser.add_argument("--batch-size", type=int, default=None, help="equations per task")
    parser.add_argument("--pya0-dir", help="where pya0 writes (default: beside the node data)")
    parser.add_argument("--report", help="also write the JSON report here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_bench_index_command(args: argparse.Namespace) -> int:
    import itertools

    from mathsearch.bench.index import format_bench_index, run_bench_index
    from mathsearch.indexer.extract import extract
    from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
    from mathsearch.indexer.records import EquationRecord
    from mathsearch.opensearch.client import connect
    from mathsearch.workers.settings import WorkerSettings

    try:
        processes = [int(n) for n in args.processes.split(",") if n]
    except ValueError:
        return fail(f"--processes {args.processes!r}: comma-separated integers")
    source = args.source
    shared = SHARED_DATA / "hepth2003" / "equation.txt"
    if source is None and shared.is_file():
        source = str(shared)
    items = extract([source]) if source else iter_hepth(bundled_sample_lines())
    records = list(
        itertools.islice((i for i in items if isinstance(i, EquationRecord)), args.limit)
    )
    if not records:
        return fail("no equations to index")
    batch = args.batch_size or WorkerSettings.from_env().batch_size
    report = run_bench_index(
        records,
        connect(),
        processes=processes,
        batch_size=batch,
        pya0_dir=Path(args.pya0_dir) if args.pya0_dir else None,
    )
    report["source"] = source or "bundled sample"
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2))
    if args.json:
        emit(json.dumps(report, indent=2))
        return 0
    emit(format_bench_index(report))
    return 0
