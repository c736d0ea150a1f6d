"""The RIPE-MambaSpike example (models.md section 1) compiled end to end: the shipped small checkpoint, and the
published widths for parameter accounting (passes.md worked check) and the AC share.

This file doubles as a model file for the compiler: ``published_32x32`` below is a factory the loader can
import by path (the published model declares ``input_shape = (2, 128, 128)``, and the driver refuses an
``--input-shape`` that contradicts a declared one)."""
from pathlib import Path

import numpy as np
import pytest

from spikec.core.cost import dense_ops
from spikec.app.driver import CompileOptions, compile_model
from spikec.frontend import trace
from spikec.app.loader import build_model
from spikec.app.summary import summary_text
from spikec.core.report import params_report, synaptic_kind
from spikec.passes.fold_batchnorm import fold_batchnorm
from spikec.passes.fuse_repconv import fuse_repconv
from spikec.passes.tdm_dual_kernel import tdm_dual_kernel

THIS = Path(__file__).resolve()
RIPE = THIS.parents[2] / "examples" / "ripe"
MODEL = RIPE / "model.py"
RIPE_PASSES = ("fuse_repconv", "fold_batchnorm", "tdm_dual_kernel")


def published_32x32():
    """The published RIPE backbone (widths 32/64/128, T = 10) declared at 32x32 instead of 128x128.

    Nothing in it depends on the resolution except activations (the head is an adaptive average pool)."""
    model = build_model(f"{MODEL}:published")
    model.input_shape = (2, 32, 32)
    return model


# -- parameter formulas (passes.md "Parameter accounting", models.md section 1) -------------------------
def repconv_training(c_in, c, square):
    """Branch weights (3x3, 1x1, 1x3, 3x1, 1x1 -> 3x3) plus gamma, beta per BN; identity and avg-pool BNs when square."""
    weights = 9 * c_in * c + c_in * c + 3 * c_in * c + 3 * c_in * c + (c_in * c + 9 * c * c)
    return weights + 2 * c * (7 if square else 5)


def repconv_fused(c_in, c):
    return 9 * c_in * c + c


def stage_counts(c_in, c, steps, neuron_params):
    """(training, deployed after fold_batchnorm + fuse_repconv) of one RepSpikeStage with DS-MPA."""
    rest = 2 * (2 * steps * c) + 2 * neuron_params * c + (3 * c * c + c) + (c_in + c)  # BNTT, neurons, DS-MPA, TDM
    return (repconv_training(c_in, c, False) + repconv_training(c, c, True) + rest,
            repconv_fused(c_in, c) + repconv_fused(c, c) + rest)


def test_the_formulas_reproduce_the_worked_check():
    assert repconv_training(2, 32, False) == 10_624 and repconv_fused(2, 32) == 608
    assert repconv_training(32, 32, True) == 27_072 and repconv_fused(32, 32) == 9_248
    assert stage_counts(2, 32, 10, 5) == (42_434, 14_594)


# -- the shipped small checkpoint ------------------------------------------------------------------
@pytest.fixture(scope="module")
def small():
    return compile_model(CompileOptions(model=f"{MODEL}:small", weights=str(RIPE / "checkpoint.pt"),
                                        inputs=str(RIPE / "inputs.npz"), passes="default"))


def test_small_checkpoint_compiles_equivalently(small):
    r = small.report
    assert r["equivalent"] is True
    assert r["frontend"]["equivalent"] and r["final"]["equivalent"]
    names = [p["name"] for p in r["passes"]]   # the default list may grow; these three run in this order
    assert [n for n in names if n in RIPE_PASSES] == list(RIPE_PASSES)
    for p in r["passes"]:
        assert p["spike_mismatches"] == 0, p["name"]
        assert p["comparison"]["equivalent"] and p["comparison"]["spikes_compared"] > 0
    assert r["final"]["spikes_compared"] > 0 and r["final"]["spike_mismatches"] == 0
    assert r["input"]["steps"] == 8 and r["input"]["shape"] == [2, 32, 32]
    ops = {n.op for n in small.graph.nodes if n.scope.startswith("stage")}
    assert not {"batchnorm", "tdm", "avgpool2d"} & ops
    # every RepConv is now a pair of 3x3 kernels over x_t and x_{t-1}
    for stage in (1, 2, 3):
        for k in (1, 2):
            assert small.graph.node(f"stage{stage}.rep{k}").op == "add"
            assert small.graph.node(f"stage{stage}.rep{k}.now").op == "conv2d"
            assert small.graph.node(f"stage{stage}.rep{k}.past").params["weight"].shape[2:] == (3, 3)


def test_small_report_ac_share_and_host_partition(small):
    r = small.report
    share = r["ac_share"]
    assert isinstance(share, float) and 0.0 < share < 1.0
    host = r["partitions"]["host"]
    dsmpa = [n.name for n in small.graph.nodes if n.op == "dsmpa"]
    assert dsmpa == ["stage1.dsmpa", "stage2.dsmpa", "stage3.dsmpa"]
    assert set(dsmpa) <= set(host)
    rows = {row["name"]: row for row in r["layers"]}
    for name in dsmpa:
        assert rows[name]["synaptic_kind"] != "AC"
    assert not any(layer["name"] in dsmpa for layer in r["cost"]["layers"] if layer["synaptic_kind"] == "AC")
    # The first convolution reads the real-valued entry BNTT output: exact, but MAC (passes.md); the rest AC.
    kinds = {name: row["synaptic_kind"] for name, row in rows.items() if row["op"] == "conv2d"}
    assert kinds.pop("stage1.rep1.now") == kinds.pop("stage1.rep1.past") == "MAC"
    assert set(kinds.values()) == {"AC"}
    # ac_share is the AC fraction of dense conv operations, by cost.dense_ops
    g = small.graph
    convs = [n for n in g.nodes if n.op == "conv2d"]
    total = sum(dense_ops(g, n) for n in convs)
    ac = sum(dense_ops(g, n) for n in convs if synaptic_kind(g, n) == "AC")
    assert share == pytest.approx(ac / total, rel=1e-12)
    layers = {layer["name"]: layer for layer in r["cost"]["layers"]}
    for n in convs:
        w = n.params["weight"]
        assert layers[n.name]["dense_ops"] == r["input"]["steps"] * np.prod(n.type.shape) * np.prod(w.shape[1:])


# -- the published model ----------------------------------------------------------------------------
def _published(passes):
    return compile_model(CompileOptions(model=f"{THIS}:published_32x32", steps=10, batch=1, passes=passes))


@pytest.fixture(scope="module")
def published_fused():
    return _published("fold_batchnorm,fuse_repconv")


def test_published_stage_parameter_accounting(published_fused):
    r = published_fused.report
    assert r["equivalent"] is True and all(p["spike_mismatches"] == 0 for p in r["passes"])
    assert r["input"]["steps"] == 10 and r["input"]["batch"] == 1 and r["input"]["shape"] == [2, 32, 32]
    by_module = r["params"]["by_module"]
    assert by_module["stage1"] == {"source": 42_434, "deployed": 14_594}
    # Stages 2 and 3 follow the same rules (SiLIF: 3 parameters per channel).
    assert by_module["stage2"] == dict(zip(("source", "deployed"), stage_counts(32, 64, 10, 3)))
    assert by_module["stage3"] == dict(zip(("source", "deployed"), stage_counts(64, 128, 10, 3)))
    assert by_module["entry"] == {"source": 2 * 10 * 2, "deployed": 40}
    assert r["params"]["source"] == sum(m["source"] for m in by_module.values())
    assert r["params"]["deployed"] == sum(m["deployed"] for m in by_module.values())
    assert r["passes"][-1]["params_after"] == r["params"]["deployed"]
    ops = {n.op for n in published_fused.graph.nodes if n.scope.startswith("stage")}
    assert "batchnorm" not in ops and "avgpool2d" not in ops and "tdm" in ops and "bntt" in ops


def test_published_parameter_counts_do_not_depend_on_resolution():
    """So counting at 32x32 is counting the published 128x128 model (tracing alone, no interpreter run)."""
    model = build_model(f"{MODEL}:published")
    reports = []
    for hw in [(128, 128), (32, 32), (16, 24)]:
        graph = fuse_repconv(fold_batchnorm(trace(model, (2, *hw))).graph).graph
        reports.append(params_report(model, graph))
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["by_module"]["stage1"] == {"source": 42_434, "deployed": 14_594}


def test_default_passes_keep_two_kernels_per_conv_in_the_report(published_fused):
    default = _published("default")
    r = default.report
    assert r["equivalent"] is True
    fused = published_fused.report["params"]["by_module"]["stage1"]["deployed"]
    stage1 = r["params"]["by_module"]["stage1"]
    assert stage1["source"] == 42_434 and stage1["deployed"] > fused
    # Two 3x3 kernels per conv (one bias); the untrained BNTTs have a time-constant unit scale, so
    # fold_batchnorm folds them into the convs; the TDMs are gone (lambda lives in the kernels).
    c = 32
    two_kernels = (2 * 9 * 2 * c + c) + (2 * 9 * c * c + c)
    assert stage1["deployed"] == two_kernels + 2 * 5 * c + (3 * c * c + c) == 23_072
    assert f"{stage1['deployed']:,}" in summary_text(r) and "stage1" in summary_text(r)
    (tdm_record,) = [p for p in r["passes"] if p["name"] == "tdm_dual_kernel"]
    assert tdm_record["params_after"] > tdm_record["params_before"]
    # The published AC share at 32x32: every layer's dense op count scales with H*W alike, so it is the
    # 128x128 value too: 1 - (stage-1 first conv) / (all convs) = 1 - 576 / 37440 = 64 / 65.
    share = r["ac_share"]
    assert 0.9 < share < 1.0
    assert share == pytest.approx(64 / 65, rel=1e-12)


def test_published_ac_share_at_full_resolution_by_the_static_formula():
    """ac_share counts dense conv operations by operand kind only (no activity), so at 128x128 it can be
    computed on the rewritten graph without running it: the spec's 98.5%."""
    model = build_model(f"{MODEL}:published")
    graph = trace(model, (2, 128, 128))
    for rewrite in (fuse_repconv, fold_batchnorm, tdm_dual_kernel):
        graph = rewrite(graph).graph
    convs = [n for n in graph.nodes if n.op == "conv2d"]
    total = sum(dense_ops(graph, n) for n in convs)
    ac = sum(dense_ops(graph, n) for n in convs if synaptic_kind(graph, n) == "AC")
    assert ac / total == pytest.approx(64 / 65, rel=1e-12)
    assert round(100 * ac / total, 1) == 98.5
