"""``mathsearch search LATEX --index papers`` on a library's enriched index (parsing and
output); the work is in :mod:`mathsearch.opensearch.library_search`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mathsearch.cli.common import emit

__all__ = ["add_library_flags", "format_library_response", "library_or_none", "run_library"]


def add_library_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that only a library index (enriched with ``math.*``) uses."""
    group = parser.add_argument_group(
        "a library's enriched index (--index papers after `mathsearch index papers --format "
        "opensearch ...`)"
    )
    group.add_argument(
        "--text-field",
        metavar="FIELD",
        help="the library's text field --text matches (default: its only text field)",
    )
    group.add_argument(
        "--text-weight",
        type=float,
        default=0.5,
        metavar="T",
        help="the text query's share of the fused score, 0..1 (default 0.5)",
    )
    group.add_argument(
        "--title-field", metavar="FIELD", help="shown as the hit's title (default: title, name)"
    )
    group.add_argument(
        "--equations",
        metavar="INDEX",
        help="equation index of the matched equations (default: the one enrichment wrote "
        "into math.index)",
    )


def library_or_none(client: Any, index: str, args: argparse.Namespace) -> Any:
    """The :class:`~mathsearch.opensearch.library_search.LibraryIndex` of ``index`` when it is
    a library index enriched with ``math.*`` (None: an equation index, or none at all)."""
    from opensearchpy.exceptions import NotFoundError

    from mathsearch.core.errors import MappingError
    from mathsearch.opensearch.enrichment import index_properties
    from mathsearch.opensearch.library_search import describe_library, is_library_index

    try:
        properties = index_properties(client.indices.get_mapping(index=index))
    except NotFoundError:
        return None
    if "eq_id" in properties:
        return None  # an equation index
    if not is_library_index(properties):
        raise MappingError(
            f"{index} is neither an equation index nor enriched with math.*: enrich it first "
            f"(mathsearch index {index} --format opensearch --field FIELD --mode text --index "
            f"{index}-eq)"
        )
    return describe_library(
        client, index, title_field=getattr(args, "title_field", None), properties=properties
    )


def run_library(
    args: argparse.Namespace, client: Any, library: Any, profile: Any, flags: dict[str, Any]
) -> int:
    """Search the library index and print the documents (``--json``: the response)."""
    from mathsearch.opensearch.library_search import library_mode, search_library
    from mathsearch.opensearch.query_encoder import ModelQueryEncoder

    requested = flags.get("mode")
    mode = library_mode(getattr(requested, "value", requested), profile.mode.value)
    encoder = ModelQueryEncoder(args.model) if args.model else None
    response = search_library(
        client,
        library.index,
        args.latex,
        text=args.text,
        text_field=args.text_field,
        text_weight=args.text_weight,
        mode=mode,
        k=flags.get("k", profile.k),
        alpha=flags.get("alpha", profile.alpha),
        depth=flags.get("depth", profile.depth),
        rank_constant=flags.get("rank_constant", profile.rank_constant),
        normalization=flags.get("normalization", profile.normalization),
        combination=flags.get("combination", profile.combination),
        encoder=encoder,
        library=library,
        equations_index=args.equations,
        profile=profile.label,
    )
    for warning in response.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        emit(json.dumps(response.to_dict(), indent=2, ensure_ascii=False))
    else:
        emit(format_library_response(response))
    return 0


def format_library_response(response: Any) -> str:
    """A person's view of a :class:`~mathsearch.opensearch.library_search.LibraryResponse`."""
    params = ", ".join(f"{k}={v}" for k, v in response.parameters.items())
    model = f", model {response.model}" if response.model else ""
    lines = [
        f"{response.index}: documents by their math, mode {response.mode} ({params}{model}) - "
        f"{response.took_ms:.0f} ms"
    ]
    if response.profile:
        lines[0] += f"\nprofile {response.profile}"
    if not response.hits:
        lines.append("no results")
    for hit in response.hits:
        title = f"  {hit.title}" if hit.title else ""
        lines.append(f"{hit.rank:>3}. {hit.score:.4f}  {hit.doc_id}{title}")
        for equation in hit.equations:
            latex = " ".join(equation.latex.split())
            latex = latex if len(latex) <= 90 else latex[:87] + "..."
            lines.append(f"       {equation.eq_id:<18} {latex}")
    return "\n".join(lines)
