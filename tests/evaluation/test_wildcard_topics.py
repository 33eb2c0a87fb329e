r"""Wildcard topics (``eval retrieval --task wildcard``): the pattern generator, the brute-force
qrels, the known-item table, the report and the options. No cluster."""

from __future__ import annotations

import random
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mathsearch.evaluation.ir_metrics import evaluate
from mathsearch.evaluation.relevance_sets import build_same_document
from mathsearch.evaluation.relevance_tasks import build_relevance
from mathsearch.evaluation.retrieval_eval import (
    RetrievalEval,
    SystemResult,
    known_item_ranks,
    known_item_summary,
    known_item_table,
    split_topics,
    task_measures,
    task_metric,
)
from mathsearch.evaluation.retrieval_report import markdown, report_dict
from mathsearch.evaluation.trec_files import Topic, read_run, write_run
from mathsearch.evaluation.wildcard_topics import (
    QID_PREFIX,
    PatternSettings,
    build_wildcard,
    candidate_nodes,
    make_pattern,
    make_patterns,
    relevant_sets,
)
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.query_variables import (
    QVAR_TAG,
    find_variables,
    parse_pattern,
    to_qvar_syntax,
)
from mathsearch.indexer.unify import equal_trees, unify

SAMPLE = Path(str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt")))

EQUATIONS = [
    r"x^2 + 1 = 0",
    r"\frac{a+b}{2m} + \frac{a+b}{c} = E",
    r"\sqrt{a+b} + \sqrt{a+b} = \sigma_1 \alpha",
    r"\Phi(x, y) = \sum_{k=-\infty}^{\infty} \phi_k(x) e^{i k y / R}",
    r"S = \frac{1}{2} \int d^D x \left[ (\partial \Phi)^2 - m^2 \Phi^2 \right]",
    r"\rho^{2\ell}_{m_0} = \frac{\pi^{1-\ell} \Gamma(\ell - 1)}{2^{2\ell-1} m_0^{2\ell-2}}",
]


@pytest.fixture(scope="module")
def featuriser() -> Iterator[Featuriser]:
    with Featuriser() as featuriser:
        yield featuriser


def tree_of(featuriser: Featuriser, latex: str) -> MathNode:
    parsed = featuriser.parse_latex(latex)
    assert isinstance(parsed, ParsedEquation), latex
    return parsed.tree


def count_equal(tree: MathNode, target: MathNode) -> int:
    """Sub-expressions of ``tree`` (the root excepted) equal to ``target``."""
    return sum(1 for node in tree.iter() if node is not tree and equal_trees(node, target))


def test_candidates_are_proper_sub_expressions(featuriser: Featuriser) -> None:
    tree = tree_of(featuriser, EQUATIONS[1])
    candidates = candidate_nodes(tree, PatternSettings(max_fraction=0.5))
    assert candidates
    limit = 0.5 * tree.size()
    for node in candidates:
        assert node is not tree and node.tag not in ("mo", "math", QVAR_TAG)
        assert node.size() <= limit


def test_patterns_are_deterministic_and_round_trip(featuriser: Featuriser) -> None:
    trees = [(f"p#{i}", tree_of(featuriser, latex)) for i, latex in enumerate(EQUATIONS)]
    first = make_patterns(trees, featuriser, len(trees), seed=3)
    again = make_patterns(trees, featuriser, len(trees), seed=3)
    assert [p.latex for p in first] == [p.latex for p in again]
    assert len(first) >= len(trees) - 1  # a draw may fail, not most
    other = make_patterns(trees, featuriser, len(trees), seed=4)
    assert [p.latex for p in other] != [p.latex for p in first]
    sources = dict(trees)
    for pattern in first:
        assert 1 <= len(pattern.variables) <= 3
        assert sorted(find_variables(pattern.latex)) == sorted(pattern.variables)
        assert all(f"?{name}" in pattern.latex for name in pattern.variables)
        assert all(rf"\qvar{{{name}}}" in pattern.qvar_latex for name in pattern.variables)
        # the LaTeX parses back to the very tree it was written from
        assert equal_trees(parse_pattern(pattern.latex, featuriser).tree, pattern.tree)
        assert pattern.neutral_latex and "?" not in pattern.neutral_latex
        # some structure is left: at least half the source's tokens stay outside the variables
        fixed = [n for n in pattern.tree.iter() if n.text is not None and n.tag != QVAR_TAG]
        source = [n for n in sources[pattern.source].iter() if n.text is not None]
        assert len(fixed) >= max(3, len(source) / 2)
        # the source matches, each variable bound to the sub-expression it replaced
        assert unify(pattern.tree, sources[pattern.source]) is not None
        assert set(pattern.replaced) == set(pattern.variables)


def test_a_repeated_sub_expression_gets_one_name_everywhere(featuriser: Featuriser) -> None:
    tree = tree_of(featuriser, EQUATIONS[2])  # \sqrt{a+b} twice
    repeated = 0
    for seed in range(40):
        made = make_pattern(tree, featuriser, random.Random(seed), source="s")
        if made is None:
            continue
        bindings = unify(made.tree, tree)
        assert bindings is not None
        for name in made.variables:
            occurrences = sum(1 for n in made.tree.iter() if n.tag == QVAR_TAG and n.text == name)
            # every occurrence of the replaced sub-expression became this one variable
            assert occurrences == count_equal(tree, bindings[name]), (made.latex, name)
            repeated += occurrences > 1
            assert made.repeated or occurrences == 1
    assert repeated, "no draw of 40 replaced the repeated square root"


def test_nearly_all_variables_is_refused(featuriser: Featuriser) -> None:
    tree = tree_of(featuriser, r"x^2 = y")
    settings = PatternSettings(min_fixed=3, max_fraction=0.9)
    for seed in range(10):
        made = make_pattern(tree, featuriser, random.Random(seed), settings=settings)
        if made is not None:
            fixed = [n for n in made.tree.iter() if n.text is not None and n.tag != QVAR_TAG]
            assert len(fixed) >= 3


GOLDEN = {
    "g#0": r"x^2 + 1 = 0",
    "g#1": r"y^2 + 1 = 0",
    "g#2": r"{a+b}^2 + 1 = 0",
    "g#3": r"x^3 + 1 = 0",
    "g#4": r"x^2 + 2 = 0",
    "g#5": r"x^2 + x^2 = 0",
    "g#6": r"x^2 + y^2 = 0",
    "g#7": r"x^2 + 1 = 0 + 0",
    "g#8": r"\frac{x^2 + 1}{2} = 0",
}


@pytest.mark.parametrize(
    ("pattern", "relevant"),
    [
        # one variable: the base of the square, anything
        (r"?x^2 + 1 = 0", ["g#0", "g#1", "g#2"]),
        # two variables bind different sub-expressions, or equal ones
        (r"?x^2 + ?y = 0", ["g#0", "g#1", "g#2", "g#4", "g#5", "g#6"]),
        # a repeated name binds equal sub-expressions only
        (r"?x^2 + ?x^2 = 0", ["g#5"]),
        (r"?x + ?y = 0", ["g#0", "g#1", "g#2", "g#3", "g#4", "g#5", "g#6"]),
        # a variable binds one node or a run of a row's items (0 + 0), never across "="
        (r"x^2 + 1 = ?z", ["g#0", "g#7"]),
        (r"?x = 0", ["g#0", "g#1", "g#2", "g#3", "g#4", "g#5", "g#6", "g#8"]),
        # the whole equation, not a part of it
        (r"?x + 1", []),
        (r"\frac{?x + 1}{2} = 0", ["g#8"]),
    ],
)
def test_brute_force_relevant_sets_are_golden(
    featuriser: Featuriser, pattern: str, relevant: list[str]
) -> None:
    trees = {eq_id: tree_of(featuriser, latex) for eq_id, latex in GOLDEN.items()}
    tree = parse_pattern(pattern, featuriser).tree
    assert relevant_sets({"q": tree}, trees) == {"q": relevant}
    assert relevant_sets({"q": tree}, trees, prefilter=False) == {"q": relevant}


def test_build_wildcard_on_the_sample(featuriser: Featuriser) -> None:
    data = build_wildcard([SAMPLE], papers=4, topics=12, seed=1)
    assert data.task == "wildcard" and 0 < len(data.topics) <= 12
    # the collection is the same-document task's for the same papers and seed
    same = build_same_document([SAMPLE], papers=4, topics=5, seed=1)
    assert [e.eq_id for e in data.collection] == [e.eq_id for e in same.collection]
    paper = {e.eq_id: e.doc_id for e in data.collection}
    for topic in data.topics:
        source = data.known_items[topic.qid]
        assert topic.qid == QID_PREFIX + source and topic.exclude == ()
        assert source in data.qrels[topic.qid]  # the source is relevant, never excluded
        assert data.groups[topic.qid] == paper[source]
        assert r"\qvar{" in data.peer_latex[topic.qid] and "?" not in data.peer_latex[topic.qid]
        details = data.details[topic.qid]
        assert details["source"] == source and details["latex"] == topic.latex
        assert details["relevant"] == len(data.qrels[topic.qid])
    info = data.info
    assert info["topics"] == len(data.topics) and info["papers"] == 4
    assert info["patterns_unmatched"] == 0
    assert sum(info["variables"].values()) == len(data.topics)
    again = build_relevance("wildcard", sources=[SAMPLE], papers=4, topics=12, seed=1)
    assert again.topics == data.topics and again.qrels == data.qrels
    tune, test = split_topics(data, seed=1)  # split by paper, as same-document
    assert not {data.groups[t.qid] for t in tune} & {data.groups[t.qid] for t in test}


def test_the_prefilter_never_drops_a_match(featuriser: Featuriser) -> None:
    data = build_wildcard([SAMPLE], papers=3, topics=8, seed=2)
    trees = {e.eq_id: tree_of(featuriser, e.latex) for e in data.collection}
    patterns = {t.qid: parse_pattern(t.latex, featuriser).tree for t in data.topics}
    fast = relevant_sets(patterns, trees)
    assert fast == relevant_sets(patterns, trees, prefilter=False)
    assert {qid: sorted(found) for qid, found in fast.items()} == {
        qid: sorted(judged) for qid, judged in data.qrels.items()
    }


def test_known_item_ranks_and_summary() -> None:
    run = {"q1": [("a", 3.0), ("s1", 2.0)], "q2": [("s2", 1.0)], "q3": [("b", 1.0)]}
    known = {"q1": "s1", "q2": "s2", "q3": "s3"}
    ranks = known_item_ranks(run, known, ["q1", "q2", "q3"])
    assert ranks == {"q1": 2, "q2": 1, "q3": None}
    summary = known_item_summary(ranks, depth=10)
    assert summary["found"] == 2 and summary["topics"] == 3
    assert summary["MRR"] == round((1 / 2 + 1) / 3, 4)
    assert summary["S@1"] == round(1 / 3, 4) and summary["S@10"] == round(2 / 3, 4)
    assert summary["median_rank"] == 1.5 and summary["width"] > 0


def test_the_report_has_recall_and_the_known_item_table(tmp_path: Path) -> None:
    qrels = {"w:a#0": {"a#0": 1, "a#1": 1}, "w:b#0": {"b#0": 1}}
    topics = [Topic("w:a#0", "?x^2 + 1"), Topic("w:b#0", "?x = y")]
    runs = {
        "bm25": {"w:a#0": [("a#1", 2.0), ("a#0", 1.0)], "w:b#0": [("c#0", 1.0)]},
        "pya0": {"w:a#0": [("a#0", 5.0)], "w:b#0": [("b#0", 1.0)]},
    }
    measures = task_measures("wildcard")
    assert measures[0] == "R@10" and "nDCG@10" in measures
    assert task_metric("wildcard") == "R@10" and task_metric("same-document") == "nDCG@10"
    assert task_metric("wildcard", "MAP") == "MAP"
    systems = []
    for name, run in runs.items():
        path = write_run(tmp_path / "runs" / f"{name}.txt", run, tag=name)
        systems.append(SystemResult(name, {}, evaluate(qrels, run, measures), path))
    result = RetrievalEval(
        task="wildcard", out_dir=tmp_path, k=100, seed=0, metric="R@10", index=None,
        data_info={"equations": 4, "papers": 2, "not_parseable": 0, "variables": {"1": 2},
                   "repeated_variables": 0, "relevant": {"mean": 1.5, "median": 1.5, "max": 2,
                                                          "only_source": 1}},
        split={"topics": 4, "tune": 2, "test": 2}, systems=systems,
    )  # fmt: skip
    result.known_item = known_item_table(systems, {"w:a#0": "a#0", "w:b#0": "b#0"}, topics)
    assert result.known_item["systems"]["pya0"]["MRR"] == 1.0
    assert result.known_item["systems"]["bm25"]["per_topic"] == {"w:a#0": 2, "w:b#0": None}
    text = markdown(result)
    assert "| system | R@10 | nDCG@10 | R@100 | P@10 | MAP | uMAP | ± |" in text
    assert "| system | ranked | MRR | S@1 | S@10 | median rank | ± |" in text
    assert "| bm25 | 1 / 2 | 0.2500 |" in text
    assert "the source equation is relevant and stays in the rankings" in text
    data = report_dict(result)
    assert data["known_item"]["depth"] == 10
    assert data["systems"]["pya0"]["means"]["R@10"] == 0.75
    assert data["files"]["topic_details"] == "topic-details.jsonl"


def test_the_wildcard_options_parse() -> None:
    from mathsearch.cli.main import _parser
    from mathsearch.cli.retrieval_eval import DEFAULT_TOPICS, PAPER_TASKS

    args = _parser().parse_args(
        ["eval", "retrieval", "--task", "wildcard", "--held-out", "-o", "out", "--no-pya0"]
    )
    assert (args.task, args.held_out, args.topics, args.metric) == ("wildcard", True, None, None)
    assert DEFAULT_TOPICS["wildcard"] == 100 and "wildcard" in PAPER_TASKS
    args = _parser().parse_args(
        ["eval", "retrieval", "--task", "wildcard", "-o", "o", "--topics", "40", "--metric", "MAP"]
    )
    assert (args.topics, args.metric) == (40, "MAP")
    with pytest.raises(SystemExit):
        _parser().parse_args(["eval", "retrieval", "--task", "wildcards", "-o", "o"])


def test_approach_zero_is_asked_the_qvar_form(featuriser: Featuriser, tmp_path: Path) -> None:
    pytest.importorskip("pya0")
    from mathsearch.evaluation.relevance_sets import CollectionEquation
    from mathsearch.evaluation.retrieval_eval import _pya0_system, _searched_topics
    from mathsearch.evaluation.wildcard_topics import WildcardPattern, wildcard_relevance

    collection = [CollectionEquation(eq_id, eq_id[0], latex) for eq_id, latex in GOLDEN.items()]
    trees = {e.eq_id: tree_of(featuriser, e.latex) for e in collection}
    patterns = []
    for source, latex in (("g#0", r"?x^2 + 1 = 0"), ("g#5", r"?x^2 + ?x^2 = 0")):
        parsed = parse_pattern(latex, featuriser)
        patterns.append(
            WildcardPattern(
                source=source, latex=latex, qvar_latex=to_qvar_syntax(latex),
                variables=parsed.variables, replaced={}, tree=parsed.tree,
                neutral_latex=parsed.neutral_latex,
            )
        )  # fmt: skip
    data = wildcard_relevance(collection, trees, patterns)
    assert data.qrels == {"w:g#0": {"g#0": 1, "g#1": 1, "g#2": 1}, "w:g#5": {"g#5": 1}}
    assert data.peer_latex["w:g#0"] == r"\qvar{x}^2 + 1 = 0"
    # the encoder is asked the pattern made neutral, as the searcher's first stage asks it
    searched = _searched_topics(data, data.topics)
    assert [t.latex for t in searched] == [p.neutral_latex for p in patterns]
    system, info = _pya0_system(
        tmp_path, data, topics=data.topics, qrels=data.qrels, workdir=tmp_path / "pya0", k=10,
        progress=False, measures=task_measures("wildcard"),
    )  # fmt: skip
    assert info["unparsed_topics"] == 0 and info["indexed"] == len(GOLDEN)
    run = read_run(system.run_path)
    # Approach Zero's wildcards find the source equation of both patterns
    assert "g#0" in [doc for doc, _ in run["w:g#0"]]
    assert "g#5" in [doc for doc, _ in run["w:g#5"]]
    assert system.evaluation.means["R@10"] > 0


class _Hit:
    def __init__(self, eq_id: str, score: float) -> None:
        self.eq_id, self.score = eq_id, score


class _FakeSearcher:
    """Ranks the whole collection by the structural check alone (a stand-in for the node: the
    wiring of the evaluation is tested, not the search)."""

    index = "fake"
    read_cache = None

    def __init__(self, collection: dict[str, MathNode], featuriser: Featuriser) -> None:
        self.collection, self.featuriser = collection, featuriser
        self.featurised: list[str] = []
        self.encoder: Any = SimpleNamespace(features=self.featurised.append)
        self.asked: list[str] = []

    def default_field(self) -> str:
        return "vector"

    def search(self, request: Any) -> Any:
        from mathsearch.indexer.unify import match

        self.asked.append(request.latex)
        pattern = parse_pattern(request.latex, self.featuriser).tree
        scored = [(match(pattern, tree).score, eq_id) for eq_id, tree in self.collection.items()]
        order = sorted(range(len(scored)), key=lambda i: -scored[i][0])
        return SimpleNamespace(hits=[_Hit(scored[i][1], scored[i][0]) for i in order][: request.k])


def test_the_wildcard_task_runs_through_the_evaluation(
    featuriser: Featuriser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from mathsearch.evaluation import retrieval_eval
    from mathsearch.evaluation.eval_index import EvalIndex

    data = build_wildcard([SAMPLE], papers=4, topics=10, seed=1)
    trees = {e.eq_id: tree_of(featuriser, e.latex) for e in data.collection}
    fake = _FakeSearcher(trees, featuriser)
    built = EvalIndex("fake", "f", "vector", "model", len(trees), reused=True)
    monkeypatch.setattr(retrieval_eval, "check_cluster", lambda client, settings: None)
    monkeypatch.setattr(retrieval_eval, "_eval_searcher", lambda *a, **k: (built, fake))
    result = retrieval_eval.run_retrieval_eval(
        data, tmp_path, k=20, seed=1, pya0=False, client=object(), settings=SimpleNamespace(),
        grid={"mode": ("rrf",)}, progress=False,
    )  # fmt: skip
    assert result.metric == "R@10" and result.task == "wildcard"
    names = [item.name for item in result.systems]
    assert "rrf" in names and "random" in names and "pya0" not in names
    # the structural check ranks every source first (an exact match): R@10 and S@1 are 1
    rrf = next(item for item in result.systems if item.name == "rrf")
    assert rrf.evaluation.means["R@10"] == 1.0
    assert result.known_item["systems"]["rrf"]["S@1"] == 1.0
    # searches asked the patterns; the encoder was warmed with their neutral LaTeX (what the
    # first stage of a wildcard search embeds), never with a pattern
    assert set(fake.asked) <= {t.latex for t in data.topics}
    neutral = {data.details[t.qid]["neutral_latex"] for t in data.topics}
    assert fake.featurised and set(fake.featurised) <= neutral
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["known_item"]["systems"]["rrf"]["found"] == result.split["test"]
    assert report["tuned"]["configurations"] == 1
    details = (tmp_path / "topic-details.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(details) == len(data.topics)
    assert "| system | R@10 | nDCG@10 |" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_the_json_summary_leaves_the_ranks_in_the_file() -> None:
    from mathsearch.cli.retrieval_eval import _summary

    report = {
        "systems": {"rrf": {"means": {"R@10": 1.0}, "per_topic": {"q": {"R@10": 1.0}}}},
        "known_item": {"depth": 10, "systems": {"rrf": {"MRR": 1.0, "per_topic": {"q": 1}}}},
    }
    summary = _summary(report)
    assert summary["systems"] == {"rrf": {"means": {"R@10": 1.0}}}
    assert summary["known_item"] == {"depth": 10, "systems": {"rrf": {"MRR": 1.0}}}
    assert _summary({"systems": {}, "known_item": None})["known_item"] is None
