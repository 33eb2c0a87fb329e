"""The ``mathsearch`` command line (docs/architecture.md, "Command line")."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap

from mathsearch.cli.bench_fuzz import add_bench_fuzz, run_bench_fuzz_command
from mathsearch.cli.bench_outage import add_bench_outage, run_bench_outage_command
from mathsearch.cli.bench_query import (
    add_bench_query,
    add_bench_recall,
    run_bench_query,
    run_bench_recall,
)
from mathsearch.cli.bench_serve import (
    add_bench_fuzz_api,
    add_bench_serve,
    run_bench_fuzz_api,
    run_bench_serve,
)
from mathsearch.cli.bench_train import add_bench_train, run_bench_train
from mathsearch.cli.common import RAW_HELP, fail
from mathsearch.cli.drop import add_drop, run_drop_command
from mathsearch.cli.eval import add_eval, run_eval
from mathsearch.cli.export import add_bench_embed, add_export, run_bench_embed, run_export
from mathsearch.cli.figures import add_figures, run_figures
from mathsearch.cli.index import (
    add_bench_index,
    add_delete,
    add_failures,
    add_index,
    add_worker,
    run_bench_index_command,
    run_delete_command,
    run_failures_command,
    run_index_command,
    run_worker,
)
from mathsearch.cli.parse import (
    add_bench,
    add_commands,
    run_bench_parse,
    run_extract,
    run_parse,
    run_vocab,
)
from mathsearch.cli.search import add_models, add_search, run_models, run_search
from mathsearch.cli.serve import add_serve, run_serve
from mathsearch.cli.train import add_train, run_train
from mathsearch.cli.tune import add_tune, run_tune
from mathsearch.core.cluster_faults import cluster_fault, refused_request
from mathsearch.core.errors import MathsearchOpenSearchError, StackError
from mathsearch.indexer.errors import IndexerError
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger("mathsearch")

EPILOG = """\
examples:
  mathsearch stack up                 start a local OpenSearch (+k-NN, neural-search) and Redis
  mathsearch stack status --json      health, nodes, plugins, versions
  mathsearch demo                     index the bundled hep-th equations, run hybrid queries
  mathsearch extract paper.tex -o equations.jsonl
  mathsearch parse equations.jsonl -o parsed.jsonl --report coverage.json
  mathsearch bench parse              equations/s per stage on the hep-th corpus
  mathsearch train gcn ../shared/data/hepth2003/*.txt --format hepth --out runs/gcn
  mathsearch eval ranking eq.txt --format hepth --checkpoint runs/gcn/checkpoint.pt
  mathsearch export runs/gcn/checkpoint.pt -o gcn-v1.onnx    ONNX + model card + parity check
  mathsearch bench embed              ONNX Runtime vs PyTorch eager, equations/s by batch size
  mathsearch search '\\frac{1}{2} m^2 \\phi^2' --mode fusion --explain
  mathsearch models add gcn-v6.onnx --use       re-embed into a new field, then switch to it
  mathsearch bench query --sizes 10000,100000 latency per mode at each index size
  mathsearch worker --queues parse,embed --concurrency 2
  mathsearch index ../shared/data/hepth2003/equation.txt --index hepth   (through the workers)
  mathsearch index paper.tex --index papers --inline                      (no broker)
  mathsearch index revised/ --index papers --prune     re-index revised papers, drop lost equations
  mathsearch delete 0301001 --index papers             remove a withdrawn paper's equations
  mathsearch failures --index papers                   what failed, by stage and reason
  mathsearch drop papers --yes                         remove an equation index entirely
  mathsearch stack up --secure        an OpenSearch node with TLS + auth (docs/security.md)
  mathsearch bench outage             index hep_array on 3 nodes while one is stopped
  mathsearch bench serve --clients 50 --duration 60   load on `mathsearch serve`
  mathsearch bench fuzz --inputs 100000               bad input through the whole pipeline

environment: MATHSEARCH_OPENSEARCH_URL, MATHSEARCH_REDIS_URL and friends (docs/configuration.md).
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mathsearch",
        description="Math search for OpenSearch.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, show its traceback instead of the one-line message",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    stack = commands.add_parser(
        "stack",
        help="the local OpenSearch node(s) and Redis",
        description="Provision, start, stop and inspect the local stack: OpenSearch assembled "
        "from pinned Maven Central artifacts (k-NN and neural-search plugins) and Redis.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch stack up                   one node on 127.0.0.1:9200, Redis on 6379
              mathsearch stack up --nodes 3         three nodes on 9200-9202 (replicas work)
              mathsearch stack node stop 2          stop one node of the cluster ...
              mathsearch stack node start 2         ... and bring it back
              mathsearch stack status --json
              mathsearch stack down
              mathsearch stack up --secure          TLS + auth node on 9240 (docs/security.md)
              mathsearch stack down --secure
              mathsearch stack up --version 3.6.0   an OpenSearch 3.x node (Java 21+) instead
            """),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stack_cmds = stack.add_subparsers(dest="stack_command", required=True, metavar="ACTION")
    up = stack_cmds.add_parser(
        "up",
        help="provision (first time) and start the stack",
        epilog="examples:\n  mathsearch stack up                one node on 9200, Redis on 6379\n"
        "  mathsearch stack up --nodes 3 --no-redis\n"
        "  mathsearch stack up --version 3.6.0\n  mathsearch stack up --secure",
        formatter_class=RAW_HELP,
    )
    up.add_argument("--nodes", type=int, default=1, help="OpenSearch nodes (default 1)")
    up.add_argument("--no-redis", action="store_true", help="start OpenSearch only")
    secure_help = "the secure profile: one TLS + basic-auth node on https://127.0.0.1:9240"
    up.add_argument("--secure", action="store_true", help=secure_help + " (no Redis)")
    version_help = (
        "OpenSearch version to build and run, one with a pinned lock (2.19.1, 3.6.0); default "
        "MATHSEARCH_OPENSEARCH_VERSION, else 2.19.1"
    )
    up.add_argument("--version", dest="opensearch_version", metavar="V", help=version_help)
    down = stack_cmds.add_parser(
        "down",
        help="stop the local nodes and our Redis",
        epilog="examples:\n  mathsearch stack down\n  mathsearch stack down --secure",
        formatter_class=RAW_HELP,
    )
    down.add_argument("--secure", action="store_true", help="stop only the secure node")
    status = stack_cmds.add_parser(
        "status",
        help="health, nodes, plugins and versions",
        description="Health, nodes, plugins and versions of the cluster at "
        "MATHSEARCH_OPENSEARCH_URL (local or not) and Redis. Exits 0 only when the cluster is "
        "green, opensearch-knn and opensearch-neural-search are installed and Redis answers.",
        epilog="examples:\n  mathsearch stack status\n  mathsearch stack status --json\n"
        "  mathsearch stack status --secure",
        formatter_class=RAW_HELP,
    )
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--secure", action="store_true", help="the secure node (no Redis check)")
    node = stack_cmds.add_parser(
        "node",
        help="stop or start one node of the local cluster",
        epilog="examples:\n  mathsearch stack node stop 2\n  mathsearch stack node start 2",
        formatter_class=RAW_HELP,
    )
    node.add_argument("action", choices=["stop", "start"])
    node.add_argument("index", type=int, help="node number, 1-based")
    assemble = stack_cmds.add_parser(
        "assemble",
        help="only build the OpenSearch home; print its path",
        epilog="examples:\n  mathsearch stack assemble\n"
        "  mathsearch stack assemble --version 3.6.0",
        formatter_class=RAW_HELP,
    )
    assemble.add_argument("--version", dest="opensearch_version", metavar="V", help=version_help)

    demo = commands.add_parser(
        "demo",
        help="the main job on the bundled real corpus",
        description="Start the stack and Celery workers, index the bundled real hep-th equations "
        "through the parse and embed queues, enrich a library index with math.* fields, and "
        "run hybrid (fusion, RRF, rescore) queries, printing the results.",
        epilog="examples:\n  mathsearch demo\n  mathsearch demo --k 5 --json\n"
        "  mathsearch demo --corpus ../shared/data/hepth2003/equation.txt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--k", type=int, default=3, help="results per query (default 3)")
    demo.add_argument("--json", action="store_true", help="machine-readable output")
    demo.add_argument("--no-stack-up", action="store_true", help="use the running cluster as is")
    demo.add_argument(
        "--corpus",
        help="index this source instead of the bundled sample "
        "(e.g. ../shared/data/hepth2003/equation.txt)",
    )

    add_commands(commands)
    add_train(commands)
    add_eval(commands)
    add_export(commands)
    add_search(commands)
    add_figures(commands)
    add_models(commands)
    add_serve(commands)
    add_tune(commands)
    bench = commands.add_parser(
        "bench",
        help="benchmarks (speed, memory) of the pipeline stages",
        epilog="examples:\n  mathsearch bench parse\n  mathsearch bench parse --limit 2000 --json\n"
        "  mathsearch bench embed --batch-sizes 1,256\n"
        "  mathsearch bench query --sizes 10000 --queries 50\n"
        "  mathsearch bench recall --candidates 10,20,50\n"
        "  mathsearch bench index --limit 3000 --processes 1,2,4\n"
        "  mathsearch bench outage --limit 3000 --stop-after 10 --down-for 15\n"
        "  mathsearch bench serve --clients 50 --duration 60 --rate 0\n"
        "  mathsearch bench fuzz --inputs 100000 --runners 2\n"
        "  mathsearch bench fuzz-api --inputs 100000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench_cmds = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    add_bench(bench_cmds)
    add_bench_embed(bench_cmds)
    add_bench_train(bench_cmds)
    add_bench_query(bench_cmds)
    add_bench_recall(bench_cmds)
    add_bench_serve(bench_cmds)
    add_bench_fuzz_api(bench_cmds)
    add_bench_index(bench_cmds)
    add_bench_outage(bench_cmds)
    add_bench_fuzz(bench_cmds)

    add_index(commands)
    add_delete(commands)
    add_drop(commands)
    add_failures(commands)
    add_worker(commands)
    return parser


def _print_status(status: dict) -> None:
    print(f"OpenSearch {status['opensearch_version']} at {status['url']}")
    local = status.get("local")
    if local:
        print(
            f"  local stack: OpenSearch {local['version']}, {local['nodes']} node(s), "
            f"home {local['home']}"
        )
    print(
        f"  cluster {status['cluster_name']}: {status['health']}, "
        f"{status['number_of_nodes']} node(s)"
    )
    for node in status["nodes"]:
        manager = " (cluster manager)" if node.get("cm") == "*" else ""
        print(
            f"    {node['name']}  {node['ip']}  v{node['version']}  "
            f"heap {node['heap.percent']}%{manager}"
        )
    print("  plugins:")
    for name, entry in sorted(status["plugins"].items()):
        print(f"    {name} {entry['version']} on {len(entry['nodes'])} node(s)")
    if status["missing_plugins"]:
        print(f"  MISSING plugins: {', '.join(status['missing_plugins'])}")
    redis = status["redis"]
    print(f"Redis at {redis['url']}: {'up, ' + str(redis['version']) if redis['ok'] else 'DOWN'}")


def _stack(args: argparse.Namespace) -> int:
    from mathsearch.stack import Stack, assemble

    stack = Stack.from_env()
    version = getattr(args, "opensearch_version", None)
    if getattr(args, "secure", False):
        if version:
            raise StackError("the secure profile is built from the default lock; drop --version")
        return _secure_stack(args, stack.settings)
    if args.stack_command == "up":
        for line in stack.up(args.nodes, with_redis=not args.no_redis, version=version):
            print(line)
    elif args.stack_command == "down":
        for line in stack.down():
            print(line)
    elif args.stack_command == "node":
        print(
            stack.node_stop(args.index) if args.action == "stop" else stack.node_start(args.index)
        )
    elif args.stack_command == "assemble":
        lock = stack.lock(version)
        print(assemble(stack.settings.cache_dir, lock, java_home=stack.settings.java_home))
    else:
        status = stack.status()
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            _print_status(status)
        healthy = status["health"] == "green" and not status["missing_plugins"]
        return 0 if healthy and status["redis"]["ok"] else 1
    return 0


def _secure_stack(args: argparse.Namespace, settings: OpenSearchSettings) -> int:
    """`stack up|down|status --secure` (docs/security.md)."""
    from mathsearch.stack.secure_stack import SecureStack

    secure = SecureStack(settings)
    if args.stack_command == "status":
        status = secure.status()
        status["redis"] = {"url": "-", "ok": True, "version": "not part of the secure profile"}
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            _print_status(status)
        return 0 if status["health"] == "green" and not status["missing_plugins"] else 1
    for line in secure.up() if args.stack_command == "up" else secure.down():
        print(line)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from mathsearch.stack.demo import run_demo

    report = run_demo(
        bring_up=not args.no_stack_up,
        k=args.k,
        corpus=args.corpus,
        progress=not args.json and sys.stderr.isatty(),
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    for line in report.stack:
        print(line)
    job = report.job
    skipped = ", ".join(f"{n} {reason}" for reason, n in report.rejected.items()) or "none"
    print(
        f"\nworkers: {report.workers}\n"
        f"indexed {report.indexed} of {job['equations']} real hep-th equations into "
        f"{report.index} through the parse and embed queues in {job['seconds']:.1f} s "
        f"({job['batches']} batches, {job['eq_per_s']:.0f} equations/s)\n"
        f"failure records (in {report.index.rsplit('-demo', 1)[0]}-failures): {skipped}"
    )
    seeds = {"gcn": "KDD 2020 graph CNN", "bitmap": "ECML 2019 bitmap CNN"}
    for model in report.models:
        print(
            f"vectors: {model['name']} ({seeds.get(model['family'], model['family'])}, "
            f"{model['dim']}-d, {model['similarity']}) in {model['field']}, ONNX Runtime on "
            f"{', '.join(model['providers'])}"
        )
    enriched = report.enrichment
    example = enriched["example"]
    print(
        f"enrichment: {enriched['documents']} library documents in {enriched['index']} got "
        f"math.* by partial updates ({enriched['equations']} equations); e.g. "
        f"{example['doc_id']}: {example['equation_count']} equations, a "
        f"{example['vector_dim']}-d document vector, symbols {', '.join(example['symbols'])}\n"
    )
    print(
        "the stack keeps running: `./deploy/run.sh mathsearch stack down` stops it; search it "
        f"in a browser with `./deploy/run.sh mathsearch serve --index {report.index}`\n"
    )
    profile = report.profile
    print(
        f"ranking profile: {profile.get('label', 'request defaults')}; every mode below uses its "
        f"parameters (alpha {profile.get('alpha')}, normalization {profile.get('normalization')}, "
        f"window {profile.get('window')}), the profile's mode first\n"
    )
    for query in report.queries:
        mark = (
            "near-identical equation first"
            if query.expected_first
            else "expected " + (" or ".join(query.expected) or "-")
        )
        print(f"query [{query.mode}]  {query.latex}   ({mark})")
        for hit in query.hits:
            latex = " ".join(hit.latex.split())
            latex = latex if len(latex) <= 90 else latex[:87] + "..."
            print(f"  {hit.rank}. {hit.score:.4f}  {hit.eq_id:<14} {latex}")
        print()
    equivalence = report.equivalence
    if equivalence:
        print(
            f"equivalent rewriting ({equivalence['index']}): {equivalence['query']}, expanded "
            f"as {equivalence['expected']}, among near misses"
        )
        for label, title in (("canonical", "bm25 with canonical forms"), ("structure_only",
                             "bm25 over structure tokens alone")):  # fmt: skip
            found = "rewriting first" if equivalence[f"{label}_first"] else "rewriting missed"
            print(f"query [{title}]   ({found})")
            for hit in equivalence[label]:
                print(f"  {hit['rank']}. {hit['score']:.4f}  {hit['eq_id']:<14} {hit['latex']}")
        print()
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.bench_command == "embed":
        return run_bench_embed(args)
    if args.bench_command == "train":
        return run_bench_train(args)
    if args.bench_command == "query":
        return run_bench_query(args)
    if args.bench_command == "recall":
        return run_bench_recall(args)
    if args.bench_command == "serve":
        return run_bench_serve(args)
    if args.bench_command == "fuzz-api":
        return run_bench_fuzz_api(args)
    if args.bench_command == "index":
        return run_bench_index_command(args)
    if args.bench_command == "outage":
        return run_bench_outage_command(args)
    if args.bench_command == "fuzz":
        return run_bench_fuzz_command(args)
    return run_bench_parse(args)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(
        level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # opensearch-py logs every failed request (with a traceback) on the logger "opensearch",
    # the parent of our own opensearch.* loggers: drop its own records unless they are errors.
    logging.getLogger("opensearch").addFilter(
        lambda record: (
            record.name != "opensearch" or record.levelno >= logging.ERROR or args.verbose
        )
    )
    handlers = {
        "stack": _stack,
        "demo": _demo,
        "worker": run_worker,
        "index": run_index_command,
        "delete": run_delete_command,
        "drop": run_drop_command,
        "failures": run_failures_command,
        "extract": run_extract,
        "parse": run_parse,
        "vocab": run_vocab,
        "bench": _bench,
        "train": run_train,
        "eval": run_eval,
        "search": run_search,
        "figures": run_figures,
        "models": run_models,
        "serve": run_serve,
        "tune": run_tune,
        "export": run_export,
    }
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        line = error_line(exc)
        if line is None or args.debug:  # a bug (or --debug): the traceback
            raise
        return fail(line)


def error_line(exc: BaseException) -> str | None:
    """The one line the command line prints for ``exc`` instead of a traceback; ``None`` for
    an exception that is not an expected failure (a bug, shown with its traceback).

    An unreachable cluster, refused credentials, failed TLS (opensearch-py's errors, however
    deep in a command they were raised) name the URL and the setting to change
    (:func:`~mathsearch.core.cluster_faults.cluster_fault`); the typed errors are their
    message, on one line.
    """
    if isinstance(exc, MathsearchOpenSearchError | IndexerError | OSError):
        return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return cluster_fault(exc) or refused_request(exc)


if __name__ == "__main__":
    sys.exit(main())
