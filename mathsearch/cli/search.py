"""``mathsearch search`` and ``mathsearch models`` (command-line parsing and output)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.cli.library_search import add_library_flags
from mathsearch.core.errors import MappingError, MathsearchOpenSearchError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import RANGE_FIELDS, Filters, Mode
from mathsearch.opensearch.search_profile import RANKING_FIELDS
from mathsearch.opensearch.search_request import WILDCARD_MODES

__all__ = ["add_models", "add_search", "run_models", "run_search"]

#: Converters of the ranking flags whose values are enum names.
_FLAG_TYPES: dict[str, Any] = {
    "mode": Mode,
    "normalization": Normalization,
    "combination": Combination,
}


def _modes_help() -> str:
    """The modes, their one-line summaries and the flags that shape each (from the registry)."""
    lines = ["\nmodes:"]
    for mode, spec in MODES.items():
        flags = " ".join(f"--{name.replace('_', '-')}" for name in spec.parameters)
        lines.append(f"  {mode.value:<12} {spec.summary}")
        if flags:
            lines.append(f"  {'':<12} shaped by {flags}")
    return "\n".join(lines) + "\n"


def add_search(commands: Any) -> None:
    """Register ``search`` on the ``mathsearch`` subparsers."""
    parser = _search_parser(commands)
    _add_query_options(parser)
    _add_ranking_options(parser)
    _add_filter_options(parser)
    _add_result_options(parser)
    _add_vector_options(parser)
    _add_rerank_options(parser)
    _add_target_options(parser)
    add_library_flags(parser)


def _search_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``search`` sub-parser: its help, description and examples (no arguments yet)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "search",
        help="search the equation index with a LaTeX query (every hybrid mode)",
        description="Featurise the LaTeX query like the indexed equations (math tokens + the "
        "ONNX model's vector) and search in one mode: knn, bm25, rescore (BM25 window re-ranked "
        "by (1-alpha)*bm25 + alpha*(1+cos)/2), knn-rescore, fusion (hybrid query + "
        "normalization-processor) or rrf (score-ranker-processor). With --encoders the query "
        "is featurised once and embedded by each encoder; every mode then uses each encoder's "
        "vector field (fusion / rrf: one hybrid query of BM25 + one kNN per field; knn: the "
        "weighted sum of the per-field kNN scores; rescore: BM25 + the weighted exact cosines). "
        "Without --profile the shipped default profile runs (opensearch/profiles/default.json): "
        "fusion of BM25 (the 32 most informative query tokens) and gcn-v7's kNN at alpha 0.4, "
        "then a second stage that re-ranks the top 50 by BM25 and gcn-v9 + gcn-v10 (their "
        "int8 variants) at rerank alpha 0.4, reading those encoders' vectors from the index "
        "(the workers write them; an index without them is embedded at query time, with a "
        "warning). --no-rerank: the first stage alone. See docs/opensearch.md and docs/tuning.md.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch search '\\frac{1}{2} m^2 \\phi^2' --mode fusion
              mathsearch search 'E = mc^2' --mode rescore --alpha 0.3 --window 100 --explain
              mathsearch search '\\int d^4x \\sqrt{-g} R' --text 'gravity action' --mode rrf --group
              mathsearch search 'x^2+y^2' --mode fusion --normalization z_score --fusion-side client
              mathsearch search 'a_n' --mode knn --doc hep-th/0301001 --range position=0:5 --json
              mathsearch search 'E = mc^2' --mode fusion --fusion-side client --max-df 0.05
              mathsearch search 'E = mc^2' --profile report/best_profile.json --k 5
              mathsearch search 'x^2+y^2' --encoders gcn,export/models/gcn-v8.onnx --mode rrf
              mathsearch search 'x^2' --encoders gcn,bitmap --mode fusion --weights 0.55,0.4,0.05
              mathsearch search 'x^2+y^2' --encoders gcn,seq2seq --mode knn --explain
              mathsearch search --like '0301004#2' --mode fusion --k 5    (similar equations)
              mathsearch search 'E = mc^2' --k 10 --offset 10                (the second page)
              mathsearch search 'x^2+y^2' --rerank gcn-v8.onnx,gcn-v9.onnx --rerank-window 50
              mathsearch search 'x^2+y^2' --no-rerank                     (the first stage alone)
              mathsearch search 'E = mc^2' --index papers                 (a library's documents)
              mathsearch search 'A_\\mu' --index papers --text 'gauge theory' --text-field body
              mathsearch search '?f(?x)^2 + ?g(?x)^2'              (query variables: wildcards)
              mathsearch search '\\frac{\\qvar{a}}{2m}' --json     (the NTCIR form of ?a)

            Query variables: ?x or \\qvar{x} stands for any one sub-expression, the same name
            for equal ones. BM25 over the pattern's tokens without a variable finds the top
            --window candidates (--wildcard-mode picks another first stage), they are unified
            with it and ranked by the match (whole equation, then a sub-expression, then a
            part of the pattern), and each hit shows what its variables bound (?x = \\alpha_{1}).

            Every ranking flag left out takes the profile's value (without --profile the
            shipped default profile's: mode fusion, alpha 0.4, depth 100, max_terms 32, the
            second stage above); a flag given explicitly wins.

            A library's own index, enriched by `mathsearch index papers --format opensearch
            --field body --mode text --index papers-eq`, is searched by its documents' math:
            BM25 over math.tokens and kNN over math.vector (the mean of the document's
            equation vectors), fused as the equation modes are (fusion, rrf, bm25 or knn; the
            profile's alpha and depth), with --text as a third list over --text-field. Each hit
            shows the document's id, its title field and its best-matching equations (from the
            equation index the enrichment wrote).
            """)
        + _modes_help(),
        formatter_class=RAW_HELP,
    )
    return parser


def _add_query_options(parser: argparse.ArgumentParser) -> None:
    """The query: LATEX or ``--like``, ``--text`` and ``--profile``."""
    parser.add_argument(
        "latex", metavar="LATEX", nargs="?", default="", help="the query equation (LaTeX)"
    )
    parser.add_argument(
        "--like",
        metavar="EQ_ID",
        help="instead of LATEX: the indexed equation EQ_ID's LaTeX, the equation itself left out "
        "(similar equations)",
    )
    parser.add_argument("--text", default="", help="words matched against the equations' context")
    parser.add_argument(
        "--profile",
        metavar="P",
        help="search profile (e.g. best_profile.json of `mathsearch tune`): its parameters are "
        "the defaults, flags given explicitly win",
    )


def _add_ranking_options(parser: argparse.ArgumentParser) -> None:
    """The mode, the result page and the fusion parameters."""
    parser.add_argument(
        "--mode", choices=[m.value for m in Mode], help="default fusion (or the profile's)"
    )
    parser.add_argument("-k", "--k", type=int, help="results (default 10)")
    parser.add_argument(
        "--offset",
        type=int,
        default=0,
        help="skip the first N results (the next page: --offset 10 -k 10; default 0)",
    )
    parser.add_argument("--alpha", type=float, help="the vector's share, 0..1 (profile: 0.4)")
    parser.add_argument("--window", type=int, help="rescore window (default 100, as the seed)")
    parser.add_argument(
        "--depth", type=int, help="hits per subquery in fusion / rrf (profile: 100)"
    )
    parser.add_argument(
        "--normalization",
        choices=[n.value for n in Normalization],
        help="fusion normalisation (default min_max)",
    )
    parser.add_argument(
        "--combination",
        choices=[c.value for c in Combination],
        help="fusion combination (default arithmetic_mean)",
    )
    parser.add_argument("--rank-constant", type=int, help="RRF constant (default 60)")
    parser.add_argument(
        "--wildcard-mode",
        choices=WILDCARD_MODES,
        help="the first stage of a query with variables: bm25 over the pattern's tokens "
        "without a variable (default, the best recall measured), a mode on the pattern "
        "made neutral, or same (--mode's)",
    )
    parser.add_argument(
        "--fusion-side",
        choices=("auto", "server", "client"),
        default="auto",
        help="where fusion / rrf run: server (neural-search pipeline) or client (one _msearch, "
        "same ranking, faster); auto = client",
    )


def _add_filter_options(parser: argparse.ArgumentParser) -> None:
    """Which equations may match (--doc, --filter, --range) and which query tokens count."""
    parser.add_argument("--doc", action="append", default=[], help="only this document (repeat)")
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="keyword filter, e.g. symbols=α,β or section=Introduction (repeat)",
    )
    parser.add_argument(
        "--range",
        action="append",
        default=[],
        metavar="FIELD=LOW:HIGH",
        help=f"range filter on {', '.join(RANGE_FIELDS)} (either bound may be empty)",
    )
    parser.add_argument(
        "--max-df",
        type=float,
        metavar="F",
        help="leave out of BM25 the query tokens found in more than F of the equations "
        "(e.g. 0.05; default: keep all)",
    )
    parser.add_argument(
        "--max-terms",
        type=int,
        metavar="N",
        help="send BM25 the N most informative distinct query tokens (idf x kind; 0: all; "
        "default: the profile's)",
    )


def _add_result_options(parser: argparse.ArgumentParser) -> None:
    """How the hits are shown: grouped by document, explained."""
    parser.add_argument("--group", action="store_true", help="group results by document")
    parser.add_argument("--explain", action="store_true", help="per-subquery score breakdown")


def _add_vector_options(parser: argparse.ArgumentParser) -> None:
    """The vector fields searched and each subquery's weight."""
    parser.add_argument("--field", help="vector field (default: the index's default)")
    parser.add_argument(
        "--encoders",
        metavar="E1,E2",
        help="encoders whose vector fields the search uses: families (gcn, bitmap, seq2seq) or "
        ".onnx paths (default: --field, else the index's default field)",
    )
    parser.add_argument(
        "--weights",
        metavar="W0,W1,...",
        help="each subquery's share, BM25 first then one per vector field, summing to 1 "
        "(default: 1-alpha for BM25, alpha split evenly over the fields)",
    )


def _add_rerank_options(parser: argparse.ArgumentParser) -> None:
    """The second stage: its encoders (or none), window and share."""
    rerank = parser.add_mutually_exclusive_group()
    rerank.add_argument(
        "--rerank",
        metavar="E1,E2",
        help="a second stage: re-rank the top --rerank-window hits of a hybrid mode with these "
        "encoders' vectors, computed at query time (families or .onnx paths; the index need not "
        "hold them; default: the profile's)",
    )
    rerank.add_argument(
        "--no-rerank", action="store_true", help="no second stage, whatever the profile says"
    )
    parser.add_argument(
        "--rerank-window", type=int, metavar="N", help="hits the second stage re-ranks (0: off)"
    )
    parser.add_argument(
        "--rerank-alpha", type=float, metavar="A", help="the rerank encoders' share, 0..1"
    )


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    """The index searched, the query model and the output format."""
    parser.add_argument(
        "--index",
        help="equation index alias (default <prefix>-equations), or a library's own index "
        "enriched with math.*: its documents ranked by their math (see below)",
    )
    parser.add_argument("--model", help="ONNX model for the query (default MATHSEARCH_MODEL)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def parse_filters(docs: list[str], terms: list[str], ranges: list[str]) -> Filters:
    """``--doc``, ``--filter`` and ``--range`` values as :class:`Filters`.

    >>> parse_filters(["d1"], ["symbols=x,y"], ["position=:3"]).clauses()[-1]
    {'range': {'position': {'lte': 3}}}
    """
    parsed_terms: dict[str, tuple[str, ...]] = {}
    for item in terms:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise ValueError(f"--filter {item!r} must look like FIELD=V1,V2")
        parsed_terms[name.strip()] = tuple(v for v in values.split(",") if v)
    parsed_ranges: dict[str, tuple[Any, Any]] = {}
    for item in ranges:
        name, sep, bounds = item.partition("=")
        low, colon, high = bounds.partition(":")
        if not sep or not colon:
            raise ValueError(f"--range {item!r} must look like FIELD=LOW:HIGH")
        parsed_ranges[name.strip()] = (_bound(low), _bound(high))
    return Filters(doc_ids=tuple(docs), terms=parsed_terms, ranges=parsed_ranges)


def _bound(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        return text  # dates stay strings


def ranking_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ranking parameters given explicitly on the command line (``None`` = not given).

    >>> ranking_flags(argparse.Namespace(mode="rrf", k=5, alpha=None))
    {'mode': <Mode.RRF: 'rrf'>, 'k': 5}
    """
    out: dict[str, Any] = {}
    for name in RANKING_FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            convert = _FLAG_TYPES.get(name)
            out[name] = convert(value) if convert else value
    return out


def parse_weights(text: str | None) -> tuple[float, ...] | None:
    """``--weights`` as floats.

    >>> parse_weights("0.5,0.25,0.25")
    (0.5, 0.25, 0.25)
    """
    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise ValueError(f"--weights {text!r}: comma-separated numbers") from exc


def run_search(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch search``."""
    from mathsearch.cli.library_search import library_or_none, run_library
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.schema import equations_alias
    from mathsearch.opensearch.search_profile import SearchProfile
    from mathsearch.opensearch.searcher import ModelQueryEncoder, Searcher
    from mathsearch.opensearch.settings import OpenSearchSettings
    from mathsearch.runtime.embedders import parse_encoders

    if bool(args.latex.strip()) == bool(args.like):
        return fail("give a LATEX query or --like EQ_ID (one of them)")
    try:
        filters = parse_filters(args.doc, args.filter, args.range)
        settings = OpenSearchSettings.from_env()
        alias = equations_alias(settings, args.index)
        client = connect(settings)
        profile = SearchProfile.load(args.profile) if args.profile else SearchProfile.default()
        library = library_or_none(client, alias, args) if args.index and not args.like else None
        if library is not None:  # the library's own documents, enriched with math.*
            return run_library(args, client, library, profile, ranking_flags(args))
        searcher = Searcher(client, alias, encoder=ModelQueryEncoder(args.model))
        # --encoders replaces the profile's encoders; without it the profile's are kept
        named: dict[str, Any] = (
            {"encoders": tuple(parse_encoders(args.encoders))} if args.encoders else {}
        )
        if args.rerank:
            named["rerank"] = tuple(parse_encoders(args.rerank))
        elif args.no_rerank:
            named["rerank"] = ()
        request = profile.request(
            args.latex,
            text=args.text,
            filters=filters,
            group=args.group,
            offset=args.offset,
            explain=args.explain,
            vector_field=args.field,
            fusion_side=args.fusion_side,
            weights=parse_weights(args.weights),
            **named,
            **ranking_flags(args),
        )
        response = searcher.similar(args.like, request) if args.like else searcher.search(request)
    except MappingError as exc:
        return fail(f"{exc}{_demo_hint(settings, args.index)}")
    except (MathsearchOpenSearchError, ValueError) as exc:
        return fail(str(exc))
    except Exception as exc:
        from mathsearch.export.errors import ExportError

        if isinstance(exc, ExportError):
            return fail(str(exc))
        raise
    for warning in response.warnings:  # stderr: --json's stdout stays one document
        sys.stderr.write(f"warning: {warning}\n")
    used = {"profile": args.profile or profile.label, "models": models_used(response, request)}
    if args.json:
        emit(json.dumps({**response.to_dict(), **used}, indent=2, ensure_ascii=False))
    else:
        emit(format_response(response, explain=args.explain))
        emit(f"profile {used['profile']}; models {', '.join(used['models']) or 'none'}")
    return 0


def models_used(response: Any, request: Any) -> list[str]:
    """The models a search ran: the vector fields' (``vec_gcn_v7`` -> ``gcn-v7``), then the
    second stage's encoders.

    >>> from types import SimpleNamespace as N
    >>> models_used(N(vector_fields=["vec_gcn_v7"], vector_field=None),
    ...             N(rerank=("gcn-v8.onnx",), rerank_window=50))
    ['gcn-v7', 'gcn-v8']
    """
    from pathlib import Path

    from mathsearch.runtime.model_card import model_name_of_field

    fields = list(
        response.vector_fields or ([response.vector_field] if response.vector_field else [])
    )
    names = [model_name_of_field(f) or f.removeprefix("vec_") for f in fields]
    if request.rerank and request.rerank_window:
        names += [Path(name).name.removesuffix(".onnx") for name in request.rerank]
    return list(dict.fromkeys(names))


def _demo_hint(settings: Any, index: str | None) -> str:
    """A pointer to the demo's index when the default one does not exist yet."""
    if index:
        return ""
    return (
        f" (after `mathsearch demo`, search its index: --index {settings.index_prefix}"
        "-demo-equations)"
    )


def format_response(response: Any, *, explain: bool = False) -> str:
    """A person's view of a :class:`~mathsearch.opensearch.results.SearchResponse`: scores
    and parameters rounded to 4 decimals (``--json`` keeps them whole)."""
    params = ", ".join(f"{k}={_param(v)}" for k, v in response.parameters.items())
    where = f", fused {response.fused}-side" if response.fused else ""
    fields = response.vector_fields or ([response.vector_field] if response.vector_field else [])
    field = f", vectors {', '.join(fields)}" if fields else ""
    lines = [f"mode {response.mode} ({params}{field}{where}) - {response.took_ms:.0f} ms"]
    if response.groups is not None:
        if not response.groups:
            lines.append("no results")
        for group in response.groups:
            lines.append(f"{group.rank:>3}. {group.doc_id}  (best {group.score:.4f})")
            for hit in group.hits:
                lines.extend(_hit_lines(hit, explain, indent="       "))
        return "\n".join(lines)
    if not response.hits:
        lines.append("no results")
    for hit in response.hits:
        lines.extend(_hit_lines(hit, explain, indent="", rank=hit.rank))
    return "\n".join(lines)


def _hit_lines(hit: Any, explain: bool, *, indent: str, rank: int | None = None) -> list[str]:
    latex = " ".join(hit.latex.split())
    latex = latex if len(latex) <= 100 else latex[:97] + "..."
    head = f"{rank:>3}. " if rank is not None else ""
    lines = [f"{indent}{head}{hit.score:9.4f}  {hit.eq_id:<18} {latex}"]
    pad = indent + " " * (len(head) + 11)
    if hit.match is not None:
        bound = ", ".join(f"?{name} = {value}" for name, value in (hit.bindings or {}).items())
        lines.append(f"{pad}{hit.match} match" + (f": {bound}" if bound else ""))
    if hit.matched_tokens:
        shown = " ".join(hit.matched_tokens[:12])
        more = f" (+{len(hit.matched_tokens) - 12})" if len(hit.matched_tokens) > 12 else ""
        lines.append(f"{pad}matched: {shown}{more}")
    if explain and hit.explanation is not None:
        e = hit.explanation
        if e.second_stage is not None:  # both stages, each on its own line
            first, second = e.first_stage or e, e.second_stage
            lines.append(f"{pad}first stage: {_parts(first)}; {first.formula} = {first.score:.4f}")
            lines.append(
                f"{pad}second stage: {_parts(second)}; {second.formula} = {second.score:.4f}"
                f" -> {e.score:.4f}"
            )
        else:
            lines.append(f"{pad}{_parts(e)}; {e.formula} = {e.score:.4f}")
    return lines


def _parts(e: Any) -> str:
    """A breakdown's subquery scores: raw -> normalised."""
    parts = [
        f"bm25 {_num(e.bm25)}" + (f" -> {_num(e.bm25_normalized)}" if e.bm25_normalized else "")
    ]
    if e.fields:
        parts += [
            f"{f.field} {_num(f.raw)}" + (f" -> {_num(f.normalized)}" if f.normalized else "")
            for f in e.fields
        ]
    else:
        parts.append(
            f"knn {_num(e.knn)}" + (f" -> {_num(e.knn_normalized)}" if e.knn_normalized else "")
        )
    return "; ".join(parts)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _param(value: Any) -> str:
    """A ranking parameter for the text output: floats to 4 significant digits.

    >>> _param(0.30000000000000004), _param([0.3333333333333333, 0.6666666666666666]), _param(10)
    ('0.3', '[0.3333, 0.6667]', '10')
    """
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_param(item) for item in value) + "]"
    return str(value)


def add_models(commands: Any) -> None:
    """Register ``models`` (vector fields of the equation index) on the subparsers."""
    parser = commands.add_parser(
        "models",
        help="vector fields of the equation index: list, add (re-embed), use, drop",
        description="Zero-downtime re-embedding: `add` puts a new model version's field beside "
        "the old one and fills it while the old field keeps serving; `use` switches the "
        "default field search uses (one atomic mapping update); `drop` rebuilds the index "
        "without an old field and swaps the alias.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch models list
              mathsearch models add models/gcn-v6.onnx        fill vec_gcn_v6 beside vec_gcn_v5
              mathsearch models use vec_gcn_v6
              mathsearch models drop vec_gcn_v5
              mathsearch models add gcn-v8.onnx --rerank      backfill the second stage's
                                                  field (float16, no ANN graph) on a live index
            """),
        formatter_class=RAW_HELP,
    )
    sub = parser.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = sub.add_parser(
        "list",
        help="vector fields, their models and the default",
        epilog="examples:\n  mathsearch models list\n"
        "  mathsearch models list --index papers --json",
        formatter_class=RAW_HELP,
    )
    add = sub.add_parser(
        "add",
        help="add a model version's field and re-embed every equation",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch models add models/gcn-v6.onnx        fill vec_gcn_v6 beside the old field
              mathsearch models add models/gcn-v6.onnx --use  ... and search it by default
              mathsearch models add gcn-v8.onnx --rerank int8 --index papers
            """),
        formatter_class=RAW_HELP,
    )
    add.add_argument("model", metavar="MODEL.onnx", help="the ONNX model (its card beside it)")
    add.add_argument("--use", action="store_true", help="make it the default when done")
    add.add_argument(
        "--rerank",
        nargs="?",
        const="float16",
        choices=("float16", "int8"),
        metavar="STORAGE",
        help="store the field for the second stage only: bytes in binary doc values, no ANN "
        "graph (float16 unless int8 is given); what `index` writes for the profile's rerank "
        "encoders",
    )
    use = sub.add_parser(
        "use",
        help="make FIELD the default vector field",
        epilog="examples:\n  mathsearch models use vec_gcn_v6\n"
        "  mathsearch models use vec_gcn_v6 --index papers --json",
        formatter_class=RAW_HELP,
    )
    use.add_argument("field", metavar="FIELD")
    drop = sub.add_parser(
        "drop",
        help="rebuild the index without FIELD, swap the alias",
        epilog="examples:\n  mathsearch models drop vec_gcn_v5\n"
        "  mathsearch models drop vec_gcn_v5 --index papers --json",
        formatter_class=RAW_HELP,
    )
    drop.add_argument("field", metavar="FIELD")
    for action in (listing, add, use, drop):
        action.add_argument("--index", help="equation index alias (default <prefix>-equations)")
        action.add_argument("--json", action="store_true", help="machine-readable output")


def run_models(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch models``."""
    from mathsearch.opensearch import vector_fields as vf
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.schema import equations_alias
    from mathsearch.opensearch.settings import OpenSearchSettings

    try:
        settings = OpenSearchSettings.from_env()
        alias = equations_alias(settings, args.index)
        client = connect(settings)
        if args.models_command == "list":
            fields = vf.vector_fields(client, alias)
            default = vf.default_vector_field(client, alias) if fields else None
            result: dict[str, Any] = {"index": alias, "default": default, "fields": fields}
            text = "\n".join(
                f"{'*' if name == default else ' '} {name:<16} {spec.get('dimension')}-d "
                f"{spec.get('space_type')}  {spec.get('storage') or 'hnsw':<7}  "
                f"{spec.get('model', '')}"
                for name, spec in fields.items()
            )
        elif args.models_command == "add":
            from mathsearch.workers.reembed import reembed

            report = reembed(
                client, alias, args.model, make_default=args.use, progress=True,
                storage=args.rerank or "hnsw",
            )  # fmt: skip
            result = report.to_dict()
            text = (
                f"{report.field}: {report.equations} equations embedded ({report.updated} "
                f"written, {report.unchanged} unchanged, failures {report.failures or 'none'})"
            )
        elif args.models_command == "use":
            vf.set_default_vector_field(client, alias, args.field)
            result = {"index": alias, "default": args.field}
            text = f"{alias} now searches {args.field} by default"
        else:
            new = vf.drop_vector_field(client, alias, args.field)
            result = {"index": alias, "dropped": args.field, "now": new}
            text = f"dropped {args.field}: {alias} -> {new}"
    except MathsearchOpenSearchError as exc:
        return fail(str(exc))
    emit(json.dumps(result, indent=2) if args.json else text)
    return 0
