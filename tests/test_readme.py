"""README.md stays a short guide for users whose commands run: its first block is the two
commands CI and new users run, it has a quick start per user, and every ``mathsearch ...`` line
of its and docs/commands.md's ``bash`` blocks parses with the real command line (a renamed or
removed flag fails here). Pure: no services."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from mathsearch.cli.main import _parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
COMMANDS = REPO / "docs" / "commands.md"
MAX_LINES = 210
QUICK_STARTS = ("the digital library", "the search engineer", "operations")

#: A trailing comment: `` #`` after a space (``'0301004#2'`` is an argument).
COMMENT = re.compile(r"\s#(?:\s|$)")
#: Environment assignments before a command: ``MATHSEARCH_EMBED_DEVICE=cuda mathsearch ...``.
ENV = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")
#: A line continued on the next (a ``\`` at its end): joined into one.
CONTINUATION = re.compile(r"\s*\\\n\s*")
#: A fenced block: its info string and its body.
BLOCK = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(path: Path) -> list[tuple[str, str]]:
    return [(m.group(1).strip(), m.group(2)) for m in BLOCK.finditer(path.read_text("utf-8"))]


def command_lines(path: Path) -> list[str]:
    """The ``mathsearch ...`` lines of ``path``'s ``bash`` blocks, trailing comments and leading
    environment assignments cut, less the ones that are not one plain command (``...``, ``&``,
    pipes, ``$(``)."""
    found = []
    for info, body in _blocks(path):
        if info != "bash":
            continue
        for raw in CONTINUATION.sub(" ", body).splitlines():
            line = ENV.sub("", COMMENT.split(raw, 1)[0].strip())
            if not line.startswith("mathsearch "):
                continue
            if any(mark in line for mark in ("...", "&", "|", "$(")):
                continue
            found.append(line)
    return found


def test_readme_is_short() -> None:
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"


def test_readme_opens_with_the_two_commands() -> None:
    info, body = _blocks(README)[0]
    commands = [line.split("#", 1)[0].strip() for line in body.splitlines() if line.strip()]
    assert info == "bash"
    assert commands[:2] == ["./deploy/run.sh demo", "./deploy/run.sh test"]


def test_readme_has_a_quick_start_per_user() -> None:
    headings = [
        line.lstrip("#").strip().lower()
        for line in README.read_text("utf-8").splitlines()
        if line.startswith("## ")
    ]
    for user in QUICK_STARTS:
        assert any("quick start" in h and user in h for h in headings), f"no quick start: {user}"


@pytest.mark.parametrize("doc", [README, COMMANDS], ids=lambda p: p.relative_to(REPO).as_posix())
def test_documented_commands_parse(doc: Path) -> None:
    lines = command_lines(doc)
    assert lines, f"{doc.name} has no mathsearch command in a bash block"
    parser = _parser()
    failed = []
    for line in lines:
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit:
            failed.append(line)
    assert not failed, "commands the CLI does not accept:\n" + "\n".join(failed)


def test_command_lines_skip_what_is_not_one_command(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "```bash\n"
        "mathsearch search 'x^2' --mode knn   # a comment\n"
        "mathsearch search --like '0301004#2' # one space\n"
        "MATHSEARCH_EMBED_DEVICE=cuda mathsearch worker --concurrency 1\n"
        "mathsearch tune --topics t.jsonl --qrels q.txt \\\n    -o report\n"
        "mathsearch worker &\n"
        "mathsearch stack status | head\n"
        "mathsearch eval ...\n"
        "echo $(mathsearch stack status)\n"
        "```\n\n```\nmathsearch search [--mode M]\n```\n",
        encoding="utf-8",
    )
    assert command_lines(doc) == [
        "mathsearch search 'x^2' --mode knn",
        "mathsearch search --like '0301004#2'",
        "mathsearch worker --concurrency 1",
        "mathsearch tune --topics t.jsonl --qrels q.txt -o report",
    ]
