"""The ``extract``, ``parse``, ``vocab`` and ``bench parse`` commands of ``mathsearch``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from mathsearch.indexer.extract import FORMATS, extract
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.report import CoverageReport
from mathsearch.indexer.settings import CONVERTERS, IndexerSettings

logger = logging.getLogger(__name__)

_RAW = argparse.RawDescriptionHelpFormatter


def add_commands(commands: Any) -> None:
    """Register the subcommands on the ``mathsearch`` parser's subparsers."""
    ext = commands.add_parser(
        "extract",
        help="extract display equations from documents into equations.jsonl",
        description="Extract every display equation (with its section and surrounding text) "
        "from LaTeX sources, hep-th record files, JSONL, JATS XML or an existing OpenSearch "
        "index. Unreadable inputs and macro fragments become failure records.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch extract paper.tex arxiv/0301004.tar.gz -o equations.jsonl
              mathsearch extract ../shared/data/hepth2003/equation.txt --format hepth -o eq.jsonl
              mathsearch extract articles/ --format jats -o eq.jsonl --report extract.json
              mathsearch extract docs-index --format opensearch --field body --mode text -o eq.jsonl
            """),
        formatter_class=_RAW,
    )
    ext.add_argument("sources", nargs="+", metavar="SRC", help="files, folders or index names")
    ext.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    ext.add_argument("-o", "--output", default="-", help="equations JSONL (default: stdout)")
    ext.add_argument("--failures", help="failure records JSONL (default: OUTPUT.failures.jsonl)")
    ext.add_argument("--report", help="write a JSON report (counts, failures by reason)")
    ext.add_argument("--field", default="latex", help="opensearch: the field to read")
    ext.add_argument(
        "--mode",
        choices=["latex", "text"],
        default="latex",
        help="opensearch: the field holds LaTeX or full text (default latex)",
    )
    ext.add_argument("--id-field", help="opensearch: document id field (default _id)")
    ext.add_argument("--section-field", help="opensearch: field with the section title")
    ext.add_argument("--json", action="store_true", help="print the report as JSON")

    parse = commands.add_parser(
        "parse",
        help="featurise equations: MathML, graph, BoW, math tokens, symbols",
        description="Convert each equation to Presentation MathML and featurise it (the KDD "
        "2020 graph with its 256-d one-hot nodes, the BoW vector, math tokens for BM25, "
        "symbols). Failures are written as records with their stage and reason.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch parse equations.jsonl -o parsed.jsonl --report coverage.json
              mathsearch parse equations.jsonl -o parsed.jsonl --converter katex
              mathsearch extract paper.tex | mathsearch parse - -o parsed.jsonl
            """),
        formatter_class=_RAW,
    )
    parse.add_argument("input", help="equations JSONL from `mathsearch extract` ('-' = stdin)")
    parse.add_argument("-o", "--output", default="-", help="parsed JSONL (default: stdout)")
    parse.add_argument("--failures", help="failure records JSONL (default: OUTPUT.failures.jsonl)")
    parse.add_argument("--report", help="write a JSON report (coverage, failures by reason)")
    parse.add_argument(
        "--converter",
        choices=CONVERTERS,
        help="LaTeX -> MathML backend (default MATHSEARCH_CONVERTER, else python)",
    )
    parse.add_argument(
        "--strict",
        action="store_true",
        help="unknown macros are failures (python converter; KaTeX always is)",
    )
    parse.add_argument("--vocab", help="vocabulary JSON (default: the shipped vocabulary-v1)")
    parse.add_argument("--prefix", action="store_true", help="add SymPy prefix tokens (slow)")
    parse.add_argument("--batch-size", type=int, default=256)
    parse.add_argument("--json", action="store_true", help="print the report as JSON")

    vocab = commands.add_parser(
        "vocab",
        help="fit or show the node vocabulary of the MathML graphs",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch vocab fit ../shared/data/hepth2003/*.txt -o vocabulary.json
              mathsearch vocab show
            """),
        formatter_class=_RAW,
    )
    vocab_cmds = vocab.add_subparsers(dest="vocab_command", required=True, metavar="ACTION")
    fit = vocab_cmds.add_parser(
        "fit",
        help="fit tag/attribute/character slots by frequency",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch vocab fit ../shared/data/hepth2003/*.txt -o vocabulary.json
              mathsearch vocab fit paper.tex --format tex -o vocabulary.json
            """),
        formatter_class=_RAW,
    )
    fit.add_argument("sources", nargs="+", metavar="SRC")
    fit.add_argument("--format", choices=FORMATS)
    fit.add_argument("-o", "--output", required=True)
    fit.add_argument("--converter", choices=CONVERTERS)
    show = vocab_cmds.add_parser(
        "show",
        help="print a vocabulary and its content hash",
        epilog="examples:\n  mathsearch vocab show                      the shipped vocabulary\n"
        "  mathsearch vocab show vocabulary.json",
        formatter_class=_RAW,
    )
    show.add_argument("path", nargs="?", help="vocabulary JSON (default: the shipped one)")


def add_bench(bench_cmds: Any) -> None:
    """Register ``bench parse`` on the ``bench`` subparsers."""
    parse = bench_cmds.add_parser(
        "parse",
        help="equations/s per stage and end to end, one process",
        description="Throughput of LaTeX -> MathML -> graph + BoW + math tokens + symbols in "
        "one process (one core), per stage and end to end; medians over --repeat runs.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench parse                   the shared hep-th corpus when present
              mathsearch bench parse --limit 5000 --repeat 5 --json
              mathsearch bench parse corpus.jsonl --format jsonl
            """),
        formatter_class=_RAW,
    )
    parse.add_argument(
        "sources",
        nargs="*",
        metavar="SRC",
        help="default: ../shared/data/hepth2003/*.txt, else the bundled sample",
    )
    parse.add_argument("--format", choices=FORMATS)
    parse.add_argument("--limit", type=int, default=None, help="first N equations only")
    parse.add_argument("--repeat", type=int, default=3, help="runs per stage (default 3)")
    parse.add_argument("--converter", choices=CONVERTERS, default="python")
    parse.add_argument("--json", action="store_true")


def _open_out(path: str, stack: ExitStack) -> IO[str]:
    if path == "-":
        return sys.stdout
    return stack.enter_context(Path(path).open("w", encoding="utf-8"))


def _failures_path(args: argparse.Namespace) -> str | None:
    if args.failures:
        return args.failures
    if args.output != "-":
        return str(Path(args.output).with_suffix("")) + ".failures.jsonl"
    return None


def _finish(report: CoverageReport, args: argparse.Namespace) -> None:
    if args.report:
        report.write(args.report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(report.summary(), file=sys.stderr)


def run_extract(args: argparse.Namespace) -> int:
    import time

    report = CoverageReport(stages=("extract",))
    start = time.perf_counter()
    with ExitStack() as stack:
        out = _open_out(args.output, stack)
        fpath = _failures_path(args)
        fout = stack.enter_context(Path(fpath).open("w", encoding="utf-8")) if fpath else None
        items = extract(
            args.sources,
            args.format,
            field=args.field,
            mode=args.mode,
            id_field=args.id_field,
            section_field=args.section_field,
            client=_source_client(args.format),
        )
        for item in tqdm(items, desc="extract", unit=" eq", disable=None, file=sys.stderr):
            report.inputs += 1
            if isinstance(item, Failure):
                report.add_failure(item)
                if fout:
                    fout.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
            else:
                report.add_success(("extract",))
                out.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
    report.seconds = time.perf_counter() - start
    _finish(report, args)
    return 0 if report.passed["extract"] or not report.inputs else 1


def read_equations(path: str) -> Iterator[EquationRecord | Failure]:
    """Records (and failure records) of an equations JSONL file ('-' = stdin)."""
    if path == "-":
        yield from _equations(sys.stdin, path)
        return
    with Path(path).open(encoding="utf-8") as stream:
        yield from _equations(stream, path)


def _equations(stream: Iterable[str], path: str) -> Iterator[EquationRecord | Failure]:
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if data.get("failure"):
                yield Failure.from_dict(data)
            else:
                yield EquationRecord.from_dict(data)
        except (ValueError, TypeError, AttributeError) as exc:
            yield Failure(
                eq_id=f"{path}:{number}",
                doc_id="",
                stage="extract",
                reason="bad-record",
                detail=f"line {number}: {exc}",
                source=path,
            )


def run_parse(args: argparse.Namespace) -> int:
    import time

    from mathsearch.indexer.parse import Featuriser
    from mathsearch.indexer.vocabulary import Vocabulary

    if args.input != "-" and not Path(args.input).is_file():
        print(f"mathsearch: error: {args.input}: no such file", file=sys.stderr)
        return 2
    vocab = Vocabulary.load(args.vocab) if args.vocab else None
    report = CoverageReport(stages=("extract", "convert", "graph", "tokens"))
    start = time.perf_counter()
    with ExitStack() as stack:
        featuriser = stack.enter_context(
            Featuriser(vocab, args.converter, with_prefix=args.prefix, strict=args.strict)
        )
        out = _open_out(args.output, stack)
        fpath = _failures_path(args)
        fout = stack.enter_context(Path(fpath).open("w", encoding="utf-8")) if fpath else None
        results = featuriser.parse_stream(read_equations(args.input), args.batch_size)
        for item in tqdm(results, desc="parse", unit=" eq", disable=None, file=sys.stderr):
            report.inputs += 1
            if isinstance(item, Failure):
                report.add_failure(item)
                if fout:
                    fout.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
                continue
            report.add_success(report.stages, item.unknown_macros)
            if args.prefix:
                report.add_optional("prefix", item.prefix_error or "ok")
            out.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
        report.stage_seconds = featuriser.times.to_dict()
    report.seconds = time.perf_counter() - start
    _finish(report, args)
    return 0 if report.passed["tokens"] or not report.inputs else 1


def run_vocab(args: argparse.Namespace) -> int:
    from mathsearch.indexer.converters import Converted, make_converter
    from mathsearch.indexer.mathml_tree import MathNode
    from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

    if args.vocab_command == "show":
        vocab = Vocabulary.load(args.path) if args.path else default_vocabulary()
        print(
            json.dumps(
                {"content_hash": vocab.content_hash, **vocab.to_dict()},
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    settings = IndexerSettings.from_env()
    records = [
        r for r in extract(args.sources, args.format, settings) if isinstance(r, EquationRecord)
    ]
    with make_converter(args.converter, settings) as converter:
        trees: list[MathNode] = []
        for start in tqdm(
            range(0, len(records), 512),
            desc="convert",
            unit=" batch",
            disable=None,
            file=sys.stderr,
        ):
            batch = [r.latex or "" for r in records[start : start + 512]]
            trees.extend(c.tree for c in converter.convert_batch(batch) if isinstance(c, Converted))
    vocab = Vocabulary.fit(trees)
    vocab.save(args.output)
    print(f"fitted on {len(trees)} equations -> {args.output} (hash {vocab.content_hash[:16]})")
    return 0


def run_bench_parse(args: argparse.Namespace) -> int:
    from mathsearch.bench.corpus import default_bench_sources
    from mathsearch.bench.parse import bench_parse, format_bench

    sources = args.sources or default_bench_sources()
    result = bench_parse(
        sources, args.format, limit=args.limit, repeat=args.repeat, converter=args.converter
    )
    print(json.dumps(result, indent=2) if args.json else format_bench(result))
    return 0


def _source_client(fmt: str | None) -> object | None:
    """The cluster client an ``opensearch`` source is read through (MATHSEARCH_OPENSEARCH_*)."""
    if fmt != "opensearch":
        return None
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.settings import OpenSearchSettings

    return connect(OpenSearchSettings.from_env())
