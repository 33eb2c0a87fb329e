"""The KaTeX backend with real node and the real pinned katex.

katex is installed by :func:`ensure_katex` into the default cache directory
(``MATHSEARCH_KATEX_DIR``, else ``CACHE_DIR/katex``), so CI installs it once (this needs the npm
registry) and reuses it afterwards. One converter serves the module.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
from lxml import etree

from mathsearch.indexer.errors import ConversionError, LimitExceeded
from mathsearch.indexer.katex_backend import (
    KatexConverter,
    KatexError,
    KatexUnavailable,
    ensure_katex,
)
from mathsearch.indexer.settings import IndexerSettings

MATHML = "http://www.w3.org/1998/Math/MathML"
M = f"{{{MATHML}}}"

# Verbatim bodies of ../shared/data/hepth2003/equation.txt (paper 2003/0301004).
HEPTH = [
    r"\Phi({\bf{x}},y)=\sum_{k=-\infty}^\infty \phi_k({\bf{x}})"
    "\n"
    r" \exp(iky/R)/\sqrt{2\pi R}; \quad \phi_k^*({\bf{x}}) = \phi_{-k}({\bf{x}}).",
    r"\rho^{2\ell}_{m_0\rightarrow m_1+m_2}=\frac{\pi^{1-\ell}\Gamma(\ell-1)"
    "\n"
    r" (\lambda(m_0^2,m_1^2,m_2^2))^{2\ell-3}}"
    "\n"
    r"  {2^{2\ell-1}m_0^{2\ell-2}\Gamma(2\ell-2)},",
    r"\left(\!\!"
    "\n"
    r" \begin{array}{ccc}j_1\!&\!j_2\!&\!j_3\\ 0\!&\!0\!&\!0\end{array}\!\!\right)^2"
    "\n"
    r" \simeq \frac{2\theta(\lambda_E)}{\pi\lambda_E(j_1^2,j_2^2,j_3^2)};"
    "\n"
    r" \qquad \lambda_E^2\equiv -\lambda^2,",
]


def sample_bodies() -> list[str]:
    """Bodies of the bundled hep-th sample's equation records (macro fragments left out)."""
    text = (
        resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt").read_text()
    )
    records = re.split(r"->2003/\d+\.tex\n", text)
    bodies = []
    for record in records:
        match = re.search(r"\\begin\{equation\}(.*)\\end\{equation\}", record, re.DOTALL)
        if match and not re.search(r"\\(?:newcommand|def)(?![A-Za-z])|#[1-9]", record):
            body = re.sub(r"\\label\{[^{}]*\}", "", match.group(1))
            bodies.append(re.sub(r"(?<!\\)%[^\n]*", "", body))
    return [body for body in bodies if body.strip()]


@pytest.fixture(scope="module")
def katex_settings() -> IndexerSettings:
    return IndexerSettings.from_env()


@pytest.fixture(scope="module")
def katex(katex_settings: IndexerSettings) -> Iterator[KatexConverter]:
    with KatexConverter(katex_settings) as converter:
        yield converter


def parse(mathml: str | ConversionError | LimitExceeded) -> etree._Element:
    assert isinstance(mathml, str), f"expected MathML, got {mathml!r}"
    root = etree.fromstring(mathml.encode("utf-8"))
    assert root.tag == f"{M}math"
    return root


def names(root: etree._Element) -> set[str]:
    return {etree.QName(element).localname for element in root.iter(etree.Element)}


def test_ensure_katex_installs_the_pinned_version(katex_settings: IndexerSettings) -> None:
    directory = ensure_katex(katex_settings)
    lock = json.loads(
        resources.files("mathsearch.indexer")
        .joinpath("resources/katex/package-lock.json")
        .read_text()
    )
    pinned = lock["packages"]["node_modules/katex"]["version"]
    installed = json.loads((directory / "node_modules/katex/package.json").read_text())
    assert installed["version"] == pinned
    assert (directory / "convert.js").is_file()
    assert directory.name.startswith(f"katex-{pinned}-")
    started = time.monotonic()
    assert ensure_katex(katex_settings) == directory  # installed once, then reused
    assert time.monotonic() - started < 5


def test_version_matches_the_lock_file(katex: KatexConverter) -> None:
    lock = json.loads(
        resources.files("mathsearch.indexer")
        .joinpath("resources/katex/package-lock.json")
        .read_text()
    )
    assert katex.version == lock["packages"]["node_modules/katex"]["version"]


def test_fraction_gives_mfrac_with_two_children(katex: KatexConverter) -> None:
    root = parse(katex.convert(r"\frac{a}{b}"))
    assert root.get("display") == "block"
    (fraction,) = root.iter(f"{M}mfrac")
    assert [child.text for child in fraction] == ["a", "b"]
    (annotation,) = root.iter(f"{M}annotation")
    assert annotation.get("encoding") == "application/x-tex"
    assert annotation.text == r"\frac{a}{b}"


def test_real_hepth_equations(katex: KatexConverter) -> None:
    results = katex.convert_batch(HEPTH)
    sums, fractions, array = (parse(result) for result in results)
    assert {"munderover", "msqrt", "msub", "msubsup"} <= names(sums)
    operators = [mo.text for mo in sums.iter(f"{M}mo")]
    assert "∑" in operators
    assert {"mfrac", "msubsup", "mi", "mn"} <= names(fractions)
    assert any(mi.text == "ℓ" for mi in fractions.iter(f"{M}mi"))
    (table,) = array.iter(f"{M}mtable")
    rows = table.findall(f"{M}mtr")
    assert len(rows) == 2
    assert all(len(row.findall(f"{M}mtd")) == 3 for row in rows)
    fences = [mo.text for mo in array.iter(f"{M}mo") if mo.get("fence") == "true"]
    assert fences == ["(", ")"]


def test_bundled_sample_converts_mostly_and_in_order(katex: KatexConverter) -> None:
    bodies = sample_bodies()
    assert len(bodies) > 150
    results = katex.convert_batch(bodies)
    assert len(results) == len(bodies)
    converted = [
        (body, result)
        for body, result in zip(bodies, results, strict=True)
        if isinstance(result, str)
    ]
    assert len(converted) > 0.6 * len(bodies)
    for body, mathml in converted:  # each answer belongs to its own input
        (annotation,) = parse(mathml).iter(f"{M}annotation")
        assert annotation.text == body
    for result in results:
        assert isinstance(result, str | ConversionError | LimitExceeded)


def test_errors_are_per_item(katex: KatexConverter) -> None:
    batch = [
        r"x^2",
        r"\foo{x} + 1",
        r"\frac{a}{b",
        r"a}",
        r"\left( a",
        r"\begin{foo}a\end{foo}",
        "y",
    ]
    results = katex.convert_batch(batch)
    assert isinstance(results[0], str) and isinstance(results[-1], str)
    unknown = results[1]
    assert isinstance(unknown, KatexError) and isinstance(unknown, ConversionError)
    assert unknown.reason == "unknown-macro"
    assert unknown.name == r"\foo"
    assert "Undefined control sequence" in str(unknown)
    assert [getattr(result, "reason", None) for result in results[2:6]] == [
        "unbalanced-braces",
        "unbalanced-braces",
        "unbalanced-delimiters",
        "unknown-environment",
    ]
    with pytest.raises(ConversionError) as raised:
        katex.convert(r"\nosuchmacro")
    assert raised.value.reason == "unknown-macro"


def test_expansion_loop_is_a_limit(katex: KatexConverter) -> None:
    (result,) = katex.convert_batch([r"\def\loop{\loop}\loop"])
    assert isinstance(result, LimitExceeded)
    assert result.reason == "too-many-expansions"


def test_deep_nesting_is_a_limit(katex: KatexConverter) -> None:
    results = katex.convert_batch(["{" * 9000 + "x" + "}" * 9000, "y"])
    assert isinstance(results[0], LimitExceeded), results[0]
    assert results[0].reason == "too-deep"
    assert isinstance(results[1], str)


def test_oversize_input_is_not_sent(katex_settings: IndexerSettings) -> None:
    huge = r"x+" * 50_000  # 100 KB
    converter = KatexConverter(katex_settings)
    try:
        results = converter.convert_batch([huge])
        assert converter.pid is None  # node was never needed
    finally:
        converter.close()
    (result,) = results
    assert isinstance(result, LimitExceeded)
    assert result.reason == "too-large"
    assert str(katex_settings.max_equation_chars) in str(result)


def test_oversize_next_to_normal_items(katex: KatexConverter) -> None:
    results = katex.convert_batch(["a", "x" * 100_000, "b"])
    assert isinstance(results[0], str) and isinstance(results[2], str)
    assert isinstance(results[1], LimitExceeded)


def test_user_macros(katex: KatexConverter) -> None:
    macros = {r"\RR": r"\mathbb{R}", "norm": r"\left\|#1\right\|"}
    real, norm = (parse(result) for result in katex.convert_batch([r"\RR", r"\norm{v}"], macros))
    (letter,) = real.iter(f"{M}mi")
    assert (letter.get("mathvariant"), letter.text) == ("double-struck", "R")
    assert [mi.text for mi in norm.iter(f"{M}mi")] == ["v"]
    assert [mo.text for mo in norm.iter(f"{M}mo")] == ["∥", "∥"]
    (without,) = katex.convert_batch([r"\RR"])  # macros do not leak into later batches
    assert isinstance(without, KatexError) and without.name == r"\RR"


def test_unicode_input(katex: KatexConverter) -> None:
    root = parse(katex.convert("α + β² = γ"))
    assert [mi.text for mi in root.iter(f"{M}mi")] == ["α", "β", "γ"]


def test_node_killed_between_batches(katex: KatexConverter) -> None:
    pid = katex.pid
    assert pid is not None
    restarts = katex.restarts
    os.kill(pid, signal.SIGKILL)
    proc = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + 10
    while proc.exists() and proc.read_text().split()[2] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # until it is dead (a zombie until the converter reaps it)
    results = katex.convert_batch([r"\frac{1}{2}", r"\sqrt{x}"])
    assert all(isinstance(result, str) for result in results)
    assert katex.pid != pid
    assert katex.restarts == restarts + 1


def test_node_killed_mid_batch(katex: KatexConverter) -> None:
    batch = [rf"\sum_{{i={n}}}^N \frac{{x_i^{n}}}{{\sqrt{{1+y_{n}}}}}" for n in range(4000)]
    pid = katex.pid
    assert pid is not None
    restarts = katex.restarts
    killer = threading.Timer(0.05, os.kill, (pid, signal.SIGKILL))
    killer.start()
    results = katex.convert_batch(batch)
    killer.join()
    assert len(results) == len(batch)
    # the item node was working on is retried alone, the rest of the batch on a fresh node
    assert all(isinstance(result, str) for result in results)
    assert katex.restarts == restarts + 1
    assert katex.pid != pid
    assert isinstance(katex.convert(r"a+b"), str)


def test_hung_node_times_out_and_the_batch_goes_on(katex_settings: IndexerSettings) -> None:
    with KatexConverter(katex_settings, timeout=1.0, item_timeout=10.0) as converter:
        pid = converter.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # node stops answering
        started = time.monotonic()
        results = converter.convert_batch(["a", "b", "c"])
        assert time.monotonic() - started < 8
        assert all(isinstance(result, str) for result in results)
        assert converter.restarts == 1
        assert converter.pid != pid


def test_missing_node_is_katex_unavailable(katex_settings: IndexerSettings, tmp_path: Path) -> None:
    settings = replace(katex_settings, node=str(tmp_path / "no-node"), katex_dir=tmp_path)
    with pytest.raises(KatexUnavailable) as raised:
        ensure_katex(settings)
    assert raised.value.reason == "katex-unavailable"
    assert "no-node" in str(raised.value)


def test_unusable_cache_dir_is_katex_unavailable(
    katex_settings: IndexerSettings, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(KatexUnavailable, match="cannot install katex"):
        ensure_katex(replace(katex_settings, katex_dir=blocker / "katex"))


def test_failed_install_reports_command_and_stderr(
    katex_settings: IndexerSettings, tmp_path: Path
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    node = tools / "node"
    node.write_text('#!/bin/sh\nexec node "$@"\n')
    npm = tools / "npm"
    npm.write_text("#!/bin/sh\necho 'npm ERR! registry unreachable' >&2\nexit 1\n")
    for script in (node, npm):
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    cache = tmp_path / "cache"
    settings = replace(katex_settings, node=str(node), katex_dir=cache)
    with pytest.raises(KatexUnavailable) as raised:
        ensure_katex(settings)
    message = str(raised.value)
    assert "npm ci" in message
    assert "registry unreachable" in message
    assert not [path for path in cache.iterdir() if path.is_dir()]  # nothing half-installed
