"""The NTCIR-12 formula-browsing topics with query variables (``\\qvar{...}``), searched as
wildcard queries against an equation index: per topic the top hits, their match and bindings,
as a Markdown table (the qualitative report of issue 75).

    python -m research.ntcir_wildcards --index mathsearch-bench-100000 --k 3 > table.md

Needs the node (``mathsearch stack up``) and an index (``mathsearch bench query --keep`` keeps
``mathsearch-bench-<size>``; the demo's ``mathsearch-demo-equations`` works too).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from mathsearch.bench.corpus import read_topics
from mathsearch.cli.common import emit
from mathsearch.core.errors import QueryError
from mathsearch.core.paths import SHARED_DATA
from mathsearch.indexer.query_variables import has_variables
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.search_request import WILDCARD_MODES, SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.settings import OpenSearchSettings

TOPICS = SHARED_DATA / "mathir-topics" / "topics.ntcir12-math-browsing.txt"


def _cell(text: str, limit: int = 70) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="equation index (alias) to search")
    parser.add_argument("--k", type=int, default=3, help="hits shown per topic (3)")
    parser.add_argument(
        "--wildcard-mode",
        default=SearchRequest.wildcard_mode,
        choices=WILDCARD_MODES,
        help=f"the first stage ({SearchRequest.wildcard_mode}, as a search's)",
    )
    parser.add_argument("--json", action="store_true", help="JSON lines instead of Markdown")
    args = parser.parse_args(argv)
    topics = [(t, latex) for t, latex in read_topics([TOPICS]) if has_variables(latex)]
    searcher = Searcher(connect(OpenSearchSettings.from_env()), args.index)
    kinds: Counter[str] = Counter()
    if not args.json:
        emit("| topic | pattern | rank | match | bindings | hit |")
        emit("|---|---|---|---|---|---|")
    for topic, latex in topics:
        try:
            request = SearchRequest(latex, k=args.k, wildcard_mode=args.wildcard_mode)
            response = searcher.search(request)
        except QueryError as exc:  # a refused topic is a row of the report
            kinds["error"] += 1
            emit(json.dumps({"topic": topic, "error": str(exc)}) if args.json else
                  f"| {topic} | `{_cell(latex)}` | - | error | {_cell(str(exc))} | |")  # fmt: skip
            continue
        kinds[response.hits[0].match if response.hits else "empty"] += 1
        for hit in response.hits:
            bound = ", ".join(f"?{k} = {v}" for k, v in (hit.bindings or {}).items())
            if args.json:
                row = {"topic": topic, "rank": hit.rank, "match": hit.match, "bindings":
                       hit.bindings, "eq_id": hit.eq_id, "latex": hit.latex}  # fmt: skip
                emit(json.dumps(row))
            else:
                pattern = f"`{_cell(latex, 50)}`" if hit.rank == 1 else ""
                name = topic.replace("NTCIR12-MathWiki-", "") if hit.rank == 1 else ""
                emit(f"| {name} | {pattern} | {hit.rank} | {hit.match} | `{_cell(bound, 60)}` "
                      f"| `{_cell(hit.latex, 60)}` |")  # fmt: skip
    sys.stderr.write(f"\ntop hits by match: {dict(kinds)} over {len(topics)} topics\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
