"""``mathsearch drop``: remove an equation index entirely (alias, versions, template, failures)."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail

__all__ = ["add_drop", "run_drop_command"]


def add_drop(commands: Any) -> None:
    """Register ``drop`` on the ``mathsearch`` subparsers."""
    parser = commands.add_parser(
        "drop",
        help="remove an equation index entirely: alias, versions, template, failure records",
        description="Remove the equation index INDEX (an alias) entirely: every versioned index "
        "behind it or left by a rebuild (INDEX-000001, ...), the alias with them, its index "
        "template INDEX-template and its failure records in the failures index (other indexes' "
        "records stay). Without --yes nothing changes: it prints what it would remove and "
        "exits 1. Refuses a concrete index, a name with wildcards, and an alias over indexes "
        "that are not mathsearch equation indexes. To remove some documents only, see "
        "`mathsearch delete`.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch drop papers                    what would go (nothing is removed)
              mathsearch drop papers --yes              remove it
              mathsearch drop mathsearch-equations --yes --json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("index", metavar="INDEX", help="the equation index's alias")
    parser.add_argument("--yes", action="store_true", help="really remove it")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_drop_command(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch drop``."""
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.index_drop import drop_index, plan_drop
    from mathsearch.opensearch.schema import failures_index_name
    from mathsearch.opensearch.settings import OpenSearchSettings

    settings = OpenSearchSettings.from_env()
    try:
        client = connect(settings)
        plan = plan_drop(client, args.index, failures_index_name(settings))
        if plan.empty:
            return fail(f"no equation index {args.index}: nothing to drop")
        if not args.yes:
            return fail(f"would drop {plan.describe()}; add --yes to remove them")
        report = drop_index(client, plan, settings)
    except MathsearchOpenSearchError as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(report.to_dict(), indent=2))
        return 0
    emit(f"dropped {report.describe()}")
    return 0
