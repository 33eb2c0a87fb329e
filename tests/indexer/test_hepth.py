from __future__ import annotations

from indexer import Rejected, bundled_sample_lines, equation_body, math_tokens, read_records


def test_records_span_lines_and_count_positions_per_paper() -> None:
    records = list(read_records(bundled_sample_lines()))
    assert len(records) == 224
    assert records[0].doc_id == "0301001" and records[0].position == 0
    multi = [r for r in records if r.doc_id == "0301004"]
    assert [r.position for r in multi] == list(range(len(multi)))
    assert multi[0].raw.count("\n") >= 2
    assert multi[0].eq_id == "0301004#0"


def test_macro_fragments_are_rejected_with_a_reason() -> None:
    records = list(read_records(bundled_sample_lines()))
    first = equation_body(records[0])  # "\begin{equation}}\n\newcommand{\eeq}{\end{equation}"
    assert isinstance(first, Rejected)
    assert first.reason
    results = [equation_body(r) for r in records]
    rejected = [r for r in results if isinstance(r, Rejected)]
    kept = [r for r in results if not isinstance(r, Rejected)]
    assert 0 < len(rejected) < 40
    assert all("\\newcommand" not in body and "#1" not in body for body in kept)


def test_equation_body_strips_environment_and_label() -> None:
    records = list(
        read_records(
            [
                "\\begin{equation}\\label{e1} a^2+b^2=c^2 % pythagoras\n",
                "\\end{equation}->2003/0301999.tex\n",
            ]
        )
    )
    assert equation_body(records[0]) == "a^2+b^2=c^2"


def test_math_tokens_drop_braces_and_layout() -> None:
    assert math_tokens(r"\frac{1}{2} m v^2") == ["\\frac", "1", "2", "m", "v", "^", "2"]
    assert math_tokens(r"\left( x \right) \quad y") == ["(", "x", ")", "y"]
