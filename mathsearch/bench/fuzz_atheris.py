"""Coverage-guided fuzzing of extraction and featurisation with atheris (libFuzzer), optional.

atheris is not a dependency (``pip install atheris``; wheels exist for CPython 3.11 on
x86-64 Linux). Each target feeds libFuzzer's bytes to one entry point and fails on anything
but a :class:`~mathsearch.indexer.parse.ParsedEquation` or a
:class:`~mathsearch.indexer.records.Failure` with a
reason - an escaping exception is a crash, a call over ``-timeout`` seconds a hang::

    python -m mathsearch.bench.fuzz_atheris latex -atheris_runs=200000 -timeout=10
    -rss_limit_mb=3072
    python -m mathsearch.bench.fuzz_atheris jats CORPUS_DIR -max_total_time=300

========  ===============================================================================
target    entry point
========  ===============================================================================
latex     :meth:`Featuriser.parse_latex` on the bytes as UTF-8 (invalid bytes replaced)
mathml    :meth:`Featuriser.parse_batch` of a record with the text as MathML
tex       :func:`mathsearch.indexer.tex_source.extract_document`, then the featuriser
jats      :func:`mathsearch.indexer.jats_source.jats_records` on the raw bytes, then the featuriser
hepth     :func:`mathsearch.indexer.hepth.iter_hepth` on the lines, then the featuriser
========  ===============================================================================

Without a corpus folder the run starts from real equations
(:class:`mathsearch.bench.fuzz_inputs.Corpus`)
written to a temporary folder.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TARGETS = ("latex", "mathml", "tex", "jats", "hepth")


class FuzzFinding(Exception):  # noqa: N818 - what the fuzzer reports
    """A result that is neither a parsed equation nor a failure with a reason."""


def make_target(name: str) -> Callable[[bytes], None]:
    """The one-input function of target ``name`` (see the module docstring)."""
    from mathsearch.indexer.hepth import iter_hepth
    from mathsearch.indexer.jats_source import jats_records
    from mathsearch.indexer.parse import Featuriser, ParsedEquation
    from mathsearch.indexer.records import EquationRecord, Failure
    from mathsearch.indexer.settings import IndexerSettings
    from mathsearch.indexer.tex_source import extract_document

    settings = IndexerSettings()
    featuriser = Featuriser(settings=settings)

    def check(items: list[EquationRecord | Failure]) -> None:
        records = [item for item in items if isinstance(item, EquationRecord)]
        for result in [*featuriser.parse_batch(records), *items]:
            ok = isinstance(result, ParsedEquation | EquationRecord) or (
                isinstance(result, Failure) and result.reason and result.stage
            )
            if not ok:
                raise FuzzFinding(f"not a parsed equation or a failure with a reason: {result!r}")

    def run(data: bytes) -> None:
        text = data.decode("utf-8", "replace")
        if name == "latex":
            check([EquationRecord("q", "", 0, latex=text)] if text else [])
        elif name == "mathml":
            check([EquationRecord("m", "", 0, mathml=text)] if text else [])
        elif name == "tex":
            check(list(extract_document(text, "doc", "", settings)))
        elif name == "jats":
            check(list(jats_records(data, "doc", "", settings)))
        else:
            check(list(iter_hepth(text.splitlines(keepends=True), settings)))

    return run


def seed_folder(name: str) -> Path:
    """A temporary folder of seed inputs for ``name`` made from real equations."""
    from mathsearch.bench.fuzz_documents import generate
    from mathsearch.bench.fuzz_inputs import Corpus

    folder = Path(tempfile.mkdtemp(prefix=f"mathsearch-atheris-{name}-"))
    corpus = Corpus.load()
    if name in ("latex", "mathml"):
        pool = corpus.equations if name == "latex" else corpus.mathml
        for number, text in enumerate(pool[:300]):
            (folder / f"seed{number}").write_text(text, "utf-8", "surrogatepass")
        return folder
    for number in range(100):
        item = generate(corpus, 0, number, (name,))
        data = item.data if isinstance(item.data, bytes) else item.data.encode()
        (folder / f"seed{number}").write_bytes(data[:200_000])
    return folder


def main(argv: list[str] | None = None) -> int:
    """``python -m mathsearch.bench.fuzz_atheris TARGET [CORPUS_DIR] [libFuzzer flags]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in TARGETS:
        sys.stderr.write(
            f"usage: python -m mathsearch.bench.fuzz_atheris {{{','.join(TARGETS)}}} ...\n"
        )
        return 2
    try:
        import atheris
    except ImportError:
        sys.stderr.write("mathsearch: error: atheris is not installed (pip install atheris)\n")
        return 1
    name, rest = argv[0], argv[1:]
    logging.basicConfig(level=logging.CRITICAL)  # refusals are expected: keep libFuzzer's output
    target: Any = make_target(name)
    atheris.instrument_all()  # indexer/ is imported already (by the package): instrument it all
    if not any(not arg.startswith("-") for arg in rest):
        rest = [str(seed_folder(name)), *rest]
    atheris.Setup([sys.argv[0], *rest], target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
