"""The row-scaled int8 products (export/quantize.py): the math on a tiny graph, a shipped model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mathsearch.export.errors import ExportError
from mathsearch.export.quantize import (
    WEIGHT_LEVELS,
    int8_dot_instructions,
    quantize_int8,
    quantize_weight,
    row_scaled_int8,
    variant_metrics,
)
from mathsearch.runtime.gcn_session import GcnSession

from .conftest import real_graphs

MODELS = Path(__file__).resolve().parents[2] / "export" / "models"
#: The superseded models, out of the wheel (models/README.md).
ARCHIVE = Path(__file__).resolve().parents[2] / "models"


def _product_graph(wide: np.ndarray, narrow: np.ndarray) -> onnx.ModelProto:
    """``Y = (X W_wide) W_narrow`` and ``G = X X^T``: two constant products (the wide one's
    weight behind an ``Identity``, as the exporter writes shared tensors) and one of two computed
    tensors."""
    rows = wide.shape[0]
    nodes = [
        helper.make_node("Identity", ["wide"], ["wide_alias"]),
        helper.make_node("MatMul", ["X", "wide_alias"], ["h"]),
        helper.make_node("MatMul", ["h", "narrow"], ["Y"]),
        helper.make_node("Transpose", ["X"], ["xt"]),
        helper.make_node("MatMul", ["X", "xt"], ["G"]),
    ]
    graph = helper.make_graph(
        nodes, "products",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", rows])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", narrow.shape[1]]),
            helper.make_tensor_value_info("G", TensorProto.FLOAT, ["N", "N"]),
        ],
        [numpy_helper.from_array(wide, "wide"), numpy_helper.from_array(narrow, "narrow")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


def test_quantize_weight_scales_each_column_to_63() -> None:
    weight = np.array([[1.0, -0.5, 0.0], [0.6, 0.2, 0.0]], dtype=np.float32)
    q, scale = quantize_weight(weight)
    assert q.dtype == np.int8 and q.tolist() == [[63, -63, 0], [38, 25, 0]]
    assert np.allclose(scale[:2], [1 / 63, 0.5 / 63]) and scale[2] > 0  # no division by 0
    assert np.abs(q * scale - weight).max() <= scale.max() / 2


def test_a_pair_of_integer_products_fits_the_int16_of_avx2_kernels() -> None:
    # AVX2's uint8 x int8 kernel adds two products into a saturating int16; full-range weights
    # (127) would overflow it on CPUs without VNNI, whatever this machine's CPU is
    rng = np.random.default_rng(1)
    q, _ = quantize_weight(rng.standard_normal((512, 64)).astype(np.float32) * 30.0)
    assert np.abs(q.astype(np.int32)).max() == WEIGHT_LEVELS
    assert np.iinfo(np.int16).max >= 2 * 255 * WEIGHT_LEVELS


def test_rows_of_very_different_size_keep_their_own_precision() -> None:
    rng = np.random.default_rng(0)
    wide = rng.standard_normal((32, 16)).astype(np.float32)
    narrow = rng.standard_normal((16, 4)).astype(np.float32)
    model = _product_graph(wide, narrow)
    # rows 1,000x apart, like a hub node's summed state beside a leaf's
    x = rng.standard_normal((64, 32)).astype(np.float32)
    x[::2] *= 1000.0
    quantised, count = row_scaled_int8(model, min_inner=32)
    assert count == 1  # the narrow weight (16 rows) and X X^T stay float32
    ops = [n.op_type for n in quantised.graph.node]
    assert ops.count("MatMulInteger") == 1 and ops.count("MatMul") == 2
    assert "Identity" not in ops and {i.name for i in quantised.graph.initializer} >= {"narrow"}
    assert "wide" not in {i.name for i in quantised.graph.initializer}  # only the int8 copy
    onnx.checker.check_model(quantised)
    (expected, gram), (got, same_gram) = _run(model, x), _run(quantised, x)
    assert np.array_equal(gram, same_gram)
    # every row within 5% of its own largest value (7-bit weights), the small rows as well as
    # the large ones: one scale for all rows would leave the small ones at about 100%
    error = np.abs(got - expected).max(axis=1) / np.abs(expected).max(axis=1)
    assert error.max() < 0.05
    assert np.median(error[1::2]) < 2 * np.median(error[::2])


def test_the_variant_card_takes_its_own_ranking_score_from_the_eval_report() -> None:
    scores = {"onnx:m.onnx": {"ranking_score": 0.81}, "bow": {"ranking_score": 0.7}}
    scores["onnx:m.int8.onnx"] = {"ranking_score": 0.8, "bound_95": 0.3}
    metrics = variant_metrics({"eval": {"triplets": 10, "scores": scores}}, "m.int8.onnx")
    assert metrics["holdout_ranking"] == 0.8 and metrics["holdout_bound_95"] == 0.3
    assert metrics["holdout_ranking_triplets"] == 10 and metrics["eval"]["scores"] == scores
    # a report that did not score the variant gives it no ranking (not the float model's)
    del scores["onnx:m.int8.onnx"]
    assert "holdout_ranking" not in variant_metrics({"eval": {"scores": scores}}, "m.int8.onnx")
    assert variant_metrics(None, "m.int8.onnx") == {}


def test_nothing_to_quantise_is_an_error() -> None:
    model = _product_graph(np.ones((8, 4), np.float32), np.ones((4, 2), np.float32))
    with pytest.raises(ExportError, match="nothing to quantise"):
        row_scaled_int8(model, min_inner=256)


def test_the_shipped_seed_size_tower_keeps_its_vectors(tmp_path: Path) -> None:
    source = tmp_path / "gcn-v9.onnx"
    for suffix in (".onnx", ".card.json"):
        (tmp_path / f"gcn-v9{suffix}").write_bytes((MODELS / f"gcn-v9{suffix}").read_bytes())
    graphs = list(real_graphs()[:300])
    card, diff = quantize_int8(source, graphs)
    assert card.parity["products"] == 4  # the three 512 x 512 layers and the 512 x 128 projection
    # 7-bit weights keep about 0.999 on average (docs/export.md, "int8"); saturated pairs would
    # pull the smallest cosine down (0.994 with 8-bit weights on an AVX2 CPU)
    assert card.parity["mean_cosine"] > 0.998 and card.parity["min_cosine"] > 0.995
    assert card.vector_field == "vec_gcn_v9_int8" and card.precision == "int8"
    assert 0 < diff < 0.05
    # the same products with one activation scale per call (ONNX Runtime's quantize_dynamic)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from mathsearch.runtime.graph_batch import pack_graphs

    per_call = tmp_path / "per-call.onnx"
    quantize_dynamic(source, per_call, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
    reference = GcnSession(source).encode(graphs)
    session = ort.InferenceSession(str(per_call), providers=["CPUExecutionProvider"])
    packed = pack_graphs(graphs, card.vocab_hash, card.vocab_sizes)
    (coarse,) = session.run(None, packed.feeds())
    cosines = (coarse * reference).sum(1) / np.linalg.norm(coarse, axis=1)
    cosines /= np.linalg.norm(reference, axis=1)
    assert cosines.mean() < card.parity["mean_cosine"] - 0.01


def test_cli_writes_the_int8_variant_of_a_shipped_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mathsearch.cli.main import main
    from mathsearch.export import quantize
    from mathsearch.runtime.model_card import load_card

    from .conftest import PARITY_FILE

    monkeypatch.setattr(quantize, "int8_dot_instructions", lambda: False)  # an AVX2-only CPU
    out = tmp_path / "gcn-v9.onnx"
    argv = ["export", str(MODELS / "gcn-v9.onnx"), "-o", str(out), "--int8"]
    argv += ["--parity-data", str(PARITY_FILE), "--format", "hepth", "--parity-equations", "200"]
    # an `eval ranking --onnx gcn-v9.onnx --onnx gcn-v9.int8.onnx` report for the variant's card
    scores = {"onnx:gcn-v9.onnx": {"ranking_score": 0.81}, "bow": {"ranking_score": 0.7}}
    scores["onnx:gcn-v9.int8.onnx"] = {"ranking_score": 0.8, "bound_95": 0.3}
    report = tmp_path / "rank.json"
    report.write_text(json.dumps({"triplets": 10, "scores": scores}), encoding="utf-8")
    assert main([*argv, "--metrics", str(report)]) == 0
    text = capsys.readouterr().out
    assert f"int8 variant: {tmp_path / 'gcn-v9.int8.onnx'} (4 products), mean cosine 0.99" in text
    assert "this CPU has no VNNI or AMX int8 instructions" in text
    card = load_card(tmp_path / "gcn-v9.int8.onnx")  # checks the file against its card
    assert card.name == "gcn-v9-int8" and card.parity["equations"] == 200
    # its own score from the report; the float model's metrics stay the float card's
    assert card.metrics["holdout_ranking"] == 0.8 and card.metrics["eval"]["scores"] == scores
    assert load_card(out).metrics == load_card(MODELS / "gcn-v9.onnx").metrics
    # a narrow model has nothing worth quantising: a one-line error, the float file written
    small = tmp_path / "gcn-v6.onnx"  # one 2 x 128 tower
    argv = ["export", str(ARCHIVE / "gcn-v6.onnx"), "-o", str(small), "--int8", *argv[5:]]
    assert main(argv) == 1
    assert "nothing to quantise" in capsys.readouterr().err and small.is_file()


def test_int8_dot_instructions_reads_the_cpu_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n\nprocessor\t: 1\n")
    assert int8_dot_instructions(info) is False  # an AVX2-only EPYC
    info.write_text("flags\t\t: fpu avx2 avx512f avx512_vnni amx_bf16\n")
    assert int8_dot_instructions(info) is True
    info.write_text("Processor\t: ARMv7\n")  # no flags line
    assert int8_dot_instructions(info) is None
    assert int8_dot_instructions(tmp_path / "missing") is None


def test_the_default_second_stage_ships_int8_towers_that_are_the_float_towers_requantised(
    tmp_path: Path,
) -> None:
    """The default profile's second-stage towers are int8 variants (opensearch/profiles/
    default.json): each is exactly what `export --int8` writes from its float file beside it,
    and embeds real equations as that float tower does."""
    from mathsearch.opensearch.search_profile import SearchProfile
    from mathsearch.runtime.model_card import load_card

    rerank = SearchProfile.default().rerank
    assert rerank and all(name.endswith(".int8.onnx") for name in rerank)
    graphs = list(real_graphs()[:200])
    for name in rerank:
        shipped = load_card(MODELS / name)  # checks the file's SHA-256 against its card
        assert shipped.precision == "int8" and shipped.vector_field.endswith("_int8")
        assert (
            shipped.metrics["holdout_ranking"]
            > shipped.metrics["eval"]["scores"]["bow"]["ranking_score"]
        )  # its own hold-out ranking, above BoW's on the same triplets
        reference = shipped.parity["reference"]
        source = tmp_path / reference
        for suffix in (".onnx", ".card.json"):
            stem = reference.removesuffix(".onnx")
            (tmp_path / f"{stem}{suffix}").write_bytes((MODELS / f"{stem}{suffix}").read_bytes())
        card, _ = quantize_int8(source, graphs)
        again = onnx.load(tmp_path / name)
        weights = {
            t.name: numpy_helper.to_array(t) for t in onnx.load(MODELS / name).graph.initializer
        }
        assert {t.name for t in again.graph.initializer} == set(weights)
        for tensor in again.graph.initializer:
            assert np.array_equal(numpy_helper.to_array(tensor), weights[tensor.name]), tensor.name
        float_vectors = GcnSession(source).encode(graphs)
        session = GcnSession(MODELS / name)
        int8_vectors = session.encode(graphs)
        # an equation's vector does not depend on the other equations of the call: alone (a
        # query) it is the one a worker's batch stored, to the last bit
        assert session.max_graphs == 1
        alone = np.concatenate([session.encode([graph]) for graph in graphs[::-1]])[::-1]
        assert np.array_equal(alone, int8_vectors)
        cosines = (float_vectors * int8_vectors).sum(1) / np.linalg.norm(int8_vectors, axis=1)
        cosines /= np.linalg.norm(float_vectors, axis=1)
        assert cosines.mean() > 0.998 and cosines.min() > 0.99
        # (the parity embeds in batches of its own: the int8 activations round per call)
        assert card.parity["mean_cosine"] == pytest.approx(float(cosines.mean()), abs=1e-3)
