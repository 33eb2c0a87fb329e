"""``mathsearch tune`` end to end on the real index: topics from real equations, a small grid.

Topics: two equations of each of the sample's 8 papers; relevant = the other equations of the
same paper (the KDD seed's same-paper notion), the query's own equation excluded.
"""

from __future__ import annotations

import csv
import json
import struct
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.cli.main import main
from mathsearch.evaluation.ir_metrics import evaluate, hoeffding_width
from mathsearch.evaluation.topic_runs import run_topics, search_topics
from mathsearch.evaluation.trec_files import Qrels, Topic, read_run, write_qrels, write_topics
from mathsearch.evaluation.tuning import tune
from mathsearch.evaluation.tuning_grid import baseline_configuration, expand, parse_grid
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.query_encoder import ModelQueryEncoder, QueryFeatures
from mathsearch.opensearch.read_cache import ReadCache
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.searcher import Searcher
from mathsearch.runtime.embedders import Embedder

# every query token (max_terms 0): the grid names it, so the shipped profile's cut does not apply
GRID = ["mode=knn,bm25,fusion,rrf", "alpha=0.2,0.5", "normalization=min_max,l2", "max_terms=0"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass
class Tuned:
    """What one ``mathsearch tune`` run left behind."""

    topics: list[Topic]
    qrels: Qrels
    topics_path: Path
    qrels_path: Path
    report: Path
    status: int


def judged_topics(dicts: list[dict[str, Any]]) -> tuple[list[Topic], Qrels]:
    by_doc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in dicts:
        by_doc[item["doc_id"]].append(item)
    topics: list[Topic] = []
    qrels: Qrels = {}
    for doc_id, eqs in sorted(by_doc.items()):
        for query in (eqs[0], eqs[len(eqs) // 2]):
            qid = f"{doc_id}-{query['position']}"
            topics.append(Topic(qid, query["latex"], exclude=(query["eq_id"],)))
            qrels[qid] = {e["eq_id"]: 1 for e in eqs if e["eq_id"] != query["eq_id"]}
    return topics, qrels


@pytest.fixture(scope="module")
def tuned(
    equation_alias: str, demo_dicts: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Tuned:
    folder = tmp_path_factory.mktemp("tune")
    topics, qrels = judged_topics(demo_dicts)
    topics_path = write_topics(folder / "topics.jsonl", topics)
    qrels_path = write_qrels(folder / "qrels.txt", qrels)
    report = folder / "report"
    files = ["--topics", str(topics_path), "--qrels", str(qrels_path)]
    options = ["--index", equation_alias, "--metric", "MAP", "-o", str(report)]
    status = main(["-q", "tune", *files, *options, "--grid", *GRID])
    return Tuned(topics, qrels, topics_path, qrels_path, report, status)


def csv_rows(tuned: Tuned) -> list[dict[str, str]]:
    with (tuned.report / "results.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.services
def test_tune_writes_the_report_folder(tuned: Tuned) -> None:
    assert tuned.status == 0
    # `mathsearch tune` searches with the shipped profile's query tokens (max_terms, max_df)
    configs = expand(parse_grid(GRID), base=SearchProfile.default())
    assert len(configs) == 7  # knn, bm25, rrf + fusion: 2 alphas x 2 normalisations
    # the baseline, the shipped profile (its 32 query tokens: not a point of this grid), runs too
    baseline = baseline_configuration(SearchProfile.default())
    names = {c.name for c in configs} | {baseline.name}
    assert len(names) == 8
    for name in ("results.csv", "results.md", "report.json", "best_profile.json"):
        assert (tuned.report / name).stat().st_size > 0
    assert {p.stem for p in (tuned.report / "runs").glob("*.txt")} == names
    rows = csv_rows(tuned)
    assert len(rows) == len(names)
    assert {row["configuration"] for row in rows} == names
    assert [row["configuration"] for row in rows if row["baseline"]] == [baseline.name]
    maps = [float(row["MAP"]) for row in rows]
    assert maps == sorted(maps, reverse=True)
    width = hoeffding_width(len(tuned.topics), 0.05)  # 16 topics: 0.3060
    assert all(float(row["confidence_width"]) == pytest.approx(width, abs=1e-6) for row in rows)
    assert [int(row["rank"]) for row in rows] == list(range(1, 9))
    report = json.loads((tuned.report / "report.json").read_text())
    assert report["metric"] == "MAP" and report["topics"] == len(tuned.topics)
    assert report["best"]["configuration"] == rows[0]["configuration"]
    assert report["best"]["confidence"]["uMAP"] is None
    table = (tuned.report / "results.md").read_text()
    assert rows[0]["configuration"] in table and "±" in table
    # every other configuration is compared with the best on the same topics
    assert rows[0]["difference_to_best"] == rows[0]["p_against_best"] == ""
    best_map = float(rows[0]["MAP"])
    for row in rows[1:]:
        assert float(row["difference_to_best"]) == pytest.approx(
            float(row["MAP"]) - best_map, abs=2e-6
        )
        assert 0.0 <= float(row["p_against_best"]) <= 1.0
    entries = report["configurations"]
    assert entries[0]["against_best"] is None
    assert all(entry["against_best"]["n"] == len(tuned.topics) for entry in entries[1:])
    assert "vs best: difference, p" in table
    # the best is compared with the baseline on the same topics; `--select best` recommends it
    assert f"`{baseline.name}` (baseline)" in table
    assert report["baseline"]["configuration"] == baseline.name
    versus = report["baseline"]["best_minus_baseline"]
    if rows[0]["baseline"]:  # the shipped profile is the best on these topics: nothing to test
        assert versus is None and "the baseline has the highest MAP" in table
    else:
        baseline_map = float(next(r for r in rows if r["baseline"])["MAP"])
        assert versus["mean_difference"] == pytest.approx(best_map - baseline_map, abs=2e-6)
        assert versus["n"] == len(tuned.topics) and "best - baseline" in table
    assert report["recommended"]["configuration"] == rows[0]["configuration"]
    assert report["recommended"]["selection"] == "best"
    assert report["recommended"]["value"] == pytest.approx(best_map, abs=1e-6)


@pytest.mark.services
def test_select_significant_keeps_a_baseline_the_topics_cannot_beat(
    tuned: Tuned, equation_alias: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 16 sample topics cannot tell fusion at alpha 0.5 from 0.4 apart: with ``--select
    significant`` and alpha 0.4 as the baseline, the recommendation stays at 0.4 whichever is
    higher."""
    old = SearchProfile(mode=Mode.FUSION, alpha=0.4, max_terms=0, source={"name": "old"})
    old_path = old.save(tmp_path / "old.json")
    files = ["--topics", str(tuned.topics_path), "--qrels", str(tuned.qrels_path)]
    argv = ["-q", "tune", *files, "--index", equation_alias, "-o", str(tmp_path / "r")]
    grid = ["--grid", "mode=fusion", "alpha=0.5", "max_terms=0"]
    capsys.readouterr()
    status = main([*argv, *grid, "--baseline", str(old_path), "--select", "significant"])
    assert status == 0
    out = capsys.readouterr().out
    assert "baseline (old (fusion, alpha 0.4)): fusion-a0.4-" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert len(report["configurations"]) == 2  # the grid point and the baseline
    versus = report["baseline"]["best_minus_baseline"]
    assert versus is None or versus["p_value"] >= 0.05  # None: the baseline is the best
    chosen = SearchProfile.load(tmp_path / "r" / "best_profile.json")
    assert chosen.alpha == 0.4 and chosen.source["selection"] == "significant"
    assert "recommended (significant: " in out and "fusion-a0.4-" in out.splitlines()[-2]


@pytest.mark.services
@pytest.mark.parametrize("measure", ["MAP", "nDCG@10", "uMAP", "P@5"])
def test_plots_are_real_pngs(tuned: Tuned, measure: str) -> None:
    data = (tuned.report / "plots" / f"{measure}_vs_alpha.png").read_bytes()
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (800, 500)
    assert len(data) > 10_000  # lines and a legend, not an empty canvas


@pytest.mark.services
def test_runs_drop_excluded_ids_and_hold_at_most_k(tuned: Tuned) -> None:
    exclude = {t.qid: set(t.exclude) for t in tuned.topics}
    for path in (tuned.report / "runs").glob("*.txt"):
        run = read_run(path)
        assert set(run) == set(exclude), path.name
        for qid, ranking in run.items():
            ids = [docid for docid, _ in ranking]
            assert not exclude[qid] & set(ids)
            assert 0 < len(ids) <= 100 and len(ids) == len(set(ids))


@pytest.mark.services
def test_best_profile_reproduces_its_score_and_beats_bm25(tuned: Tuned, searcher: Searcher) -> None:
    profile = SearchProfile.load(tuned.report / "best_profile.json")
    rows = csv_rows(tuned)
    assert profile.source["metric"] == "MAP"
    assert profile.source["tuned_on"] == str(tuned.topics_path)
    assert profile.source["value"] == pytest.approx(float(rows[0]["MAP"]), abs=1e-6)
    assert profile.mode.value == rows[0]["mode"]
    again = evaluate(tuned.qrels, search_topics(searcher, tuned.topics, profile))
    assert again.means["MAP"] == pytest.approx(profile.source["value"], abs=1e-9)
    bm25_run = search_topics(searcher, tuned.topics, SearchProfile(mode=Mode.BM25, k=100))
    bm25 = evaluate(tuned.qrels, bm25_run).means["MAP"]
    assert float(next(r for r in rows if r["mode"] == "bm25")["MAP"]) == pytest.approx(bm25)
    assert profile.source["value"] > bm25


@pytest.mark.services
def test_search_takes_defaults_from_the_profile_and_flags_win(
    tuned: Tuned, equation_alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tuned.report / "best_profile.json")
    profile = SearchProfile.load(path)
    latex = tuned.topics[0].latex
    argv = ["-q", "search", latex, "--profile", path, "--index", equation_alias]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["mode"] == profile.mode.value
    assert found["parameters"] == profile.request(latex).parameters()
    assert len(found["hits"]) == profile.k
    assert main([*argv, "--mode", "bm25", "--k", "3", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["mode"], len(found["hits"])) == ("bm25", 3)


@pytest.mark.services
def test_cli_failures_are_one_line(
    tuned: Tuned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["-q", "tune", "--topics", str(tuned.topics_path), "--qrels", str(tuned.qrels_path)]
    bad_qrels = tmp_path / "qrels.txt"
    bad_qrels.write_text("q1 0 a 1\nq1 0 b\n")
    cases = [
        ([*base, "--index", "mathsearch-no-such-index", "-o", str(tmp_path / "a")], "no-such"),
        ([*base, "--grid", "mode=fusion", "speed=2", "-o", str(tmp_path / "b")], "speed"),
        ([*base[:-1], str(bad_qrels), "-o", str(tmp_path / "c")], "qrels.txt:2:"),
        ([*base, "--metric", "P@five", "-o", str(tmp_path / "d")], "P@five"),
        ([*base, "--select", "significant", "--baseline", "none", "-o", str(tmp_path / "e")],
         "baseline"),
        ([*base, "--baseline", str(tmp_path / "nope.json"), "-o", str(tmp_path / "f")],
         "nope.json"),
    ]  # fmt: skip
    for argv, reason in cases:
        capsys.readouterr()
        assert main(argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("mathsearch: error:") and reason in err[0]


class CountingEncoder:
    """Counts featurisations (to see the grid's cache at work)."""

    def __init__(self, inner: ModelQueryEncoder) -> None:
        self.inner = inner
        self.calls = 0

    def features(self, latex: str) -> QueryFeatures:
        self.calls += 1
        return self.inner.features(latex)


@pytest.mark.services
def test_topic_runs_cache_features_and_survive_bad_queries(
    client: OpenSearch, equation_alias: str, encoder: Embedder, tuned: Tuned
) -> None:
    counting = CountingEncoder(ModelQueryEncoder(encoder))
    searcher = Searcher(client, equation_alias, encoder=counting)
    topics = [*tuned.topics[:3], Topic("broken", r"\frac{x")]
    for alpha in (0.2, 0.8):
        result = run_topics(searcher, topics, SearchProfile(mode=Mode.FUSION), alpha=alpha, k=5)
        assert result.run["broken"] == [] and set(result.failures) == {"broken"}
        assert "unbalanced" in result.failures["broken"]
        assert all(len(result.run[t.qid]) == 5 for t in topics[:3])
    assert counting.calls == len(topics)  # once per LaTeX, not once per configuration


@pytest.mark.services
def test_the_read_cache_changes_no_run_and_shares_the_candidate_searches(
    client: OpenSearch, equation_alias: str, encoder: Embedder, tuned: Tuned, tmp_path: Path
) -> None:
    grid = ["mode=fusion,rescore,rrf,knn-rescore,bm25", "alpha=0.3,0.7", "max_terms=0"]
    # the first stage's candidate searches are what configurations share; the second stage
    # reads each configuration's own window, so it is left out here
    configs = expand(parse_grid(grid), base=replace(SearchProfile.default(), rerank=()))
    searcher = Searcher(client, equation_alias, encoder=ModelQueryEncoder(encoder))
    args = (searcher, tuned.topics, tuned.qrels, configs)
    cached = tune(*args, out_dir=tmp_path / "cached", progress=False)
    assert searcher.read_cache is None  # the run's own cache is gone with the run
    plain = tune(*args, out_dir=tmp_path / "plain", progress=False, read_cache=False)
    runs = sorted((tmp_path / "cached" / "runs").iterdir())
    assert [p.name for p in runs] == sorted(p.name for p in (tmp_path / "plain" / "runs").iterdir())
    assert len(runs) == len(configs)
    for path in runs:
        assert path.read_text() == (tmp_path / "plain" / "runs" / path.name).read_text()
    assert [r.config.name for r in cached.results] == [r.config.name for r in plain.results]
    shared = ReadCache()
    searcher.read_cache = shared
    tune(*args, out_dir=tmp_path / "shared", progress=False)
    assert searcher.read_cache is shared  # a cache the caller set is left to the caller
    # the configurations after the first of a mode find its candidate searches in memory:
    # more reads come from memory than go to the cluster (183 against 105 here)
    assert shared.hits > shared.misses
