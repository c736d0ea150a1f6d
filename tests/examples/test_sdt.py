"""The Spike-driven Transformer example (models.md section 3) compiled end to end from its shipped checkpoint:
equivalent through every default pass, the attention reassociated to the linear order with both MAC counts
reported, the dynamic-weight products placed on the host partition, and (when the ONNX target is there)
spike-exact in onnxruntime."""
from pathlib import Path

import numpy as np
import pytest

from spikec.app.driver import CompileOptions, compile_model
from spikec.core.interpreter import run
from spikec.app.loader import build_model, load_inputs, load_weights
from spikec.passes import DEFAULT
from spikec.passes.reassociate_attention import costs

SDT = Path(__file__).resolve().parents[2] / "examples" / "sdt"
MODEL, CKPT, INPUTS = SDT / "model.py", SDT / "checkpoint.pt", SDT / "inputs.npz"
ATTENTION_OPS = ("reshape", "transpose", "matmul")


def options(**kw):
    return CompileOptions(model=f"{MODEL}:small", weights=str(CKPT), inputs=str(INPUTS), passes="default", **kw)


@pytest.fixture(scope="module")
def source():
    model = build_model(f"{MODEL}:small")
    load_weights(model, str(CKPT))
    return model.eval()


@pytest.fixture(scope="module")
def compiled():
    return compile_model(options())


def attention_modules(model):
    return [block.attn for block in model.blocks]


# -- the shipped files -------------------------------------------------------------------------------
def test_shipped_inputs_are_static_images_repeated_over_t(source):
    with np.load(INPUTS, allow_pickle=False) as z:
        x, labels = z["input"], z["label"]
    assert x.dtype == np.float32 and x.shape == (source.steps, 16, *source.input_shape) == (4, 16, 1, 8, 8)
    assert labels.shape == (16,) and labels.dtype.kind == "i" and set(labels) <= set(range(10))
    assert all(np.array_equal(x[t], x[0]) for t in range(x.shape[0]))
    assert x.min() >= 0.0 and x.max() <= 1.0 and not np.isin(x, (0.0, 1.0)).all()   # real pixel values
    assert np.array_equal(load_inputs(str(INPUTS)), x)


# -- compile: equivalence through every default pass -------------------------------------------------
def test_checkpoint_compiles_equivalently(compiled):
    r = compiled.report
    assert r["equivalent"] is True
    assert r["frontend"]["equivalent"] and r["final"]["equivalent"]
    assert r["input"]["kind"] == "real" and (r["input"]["steps"], r["input"]["batch"]) == (4, 16)
    assert [p["name"] for p in r["passes"]] == list(DEFAULT)
    for p in r["passes"]:
        assert p["spike_mismatches"] == 0, p["name"]
        assert p["comparison"]["equivalent"], p["name"]
    assert r["final"]["spikes_compared"] > 0 and r["final"]["spike_mismatches"] == 0
    ops = [n.op for n in compiled.graph.nodes]
    assert "batchnorm" not in ops          # every Conv -> BN folded


# -- the attention: reassociated, both MAC counts reported ---------------------------------------------
def test_attention_is_reported_in_the_linear_order_with_both_mac_counts(compiled, source):
    attention = compiled.report["attention"]
    modules = attention_modules(source)
    assert attention is not None and len(attention) == len(modules)
    for entry, attn in zip(attention, modules):
        n, d = attn.hw[0] * attn.hw[1], attn.head_dim
        assert d < n                                           # small(): head_dim 8 < 16 tokens
        assert (entry["tokens"], entry["head_dim"]) == (n, d)
        assert entry["source_order"] == "pairwise" and entry["chosen_order"] == "linear"
        assert entry["macs"] == costs(n, n, d, d, attn.heads)
        assert entry["macs"] == {"pairwise": attn.heads * n * n * 2 * d, "linear": attn.heads * 2 * n * d * d}
        assert entry["macs"]["linear"] < entry["macs"]["pairwise"]
        outer = compiled.graph.node(entry["node"])
        inner = compiled.graph.node(outer.inputs[1])
        assert outer.op == inner.op == "matmul" and inner.name == f"{entry['node']}.kv"
        assert inner.type.kind == "integer" and inner.type.ceiling == n      # K^T V of binary spikes
    record = next(p for p in compiled.report["passes"] if p["name"] == "reassociate_attention")
    assert record["skipped"] == [] and len(record["nodes_changed"]) == 2 * len(modules)
    assert any("pairwise order -> linear" in note for note in record["notes"])


def test_products_run_on_the_host_partition(compiled):
    parts = compiled.report["partitions"]
    products = {n.name for n in compiled.graph.nodes if n.op == "matmul"}
    assert len(products) == 2 * len(compiled.report["attention"])
    assert products <= set(parts["host"])
    touching = [c for c in parts["crossing"] if products & set(c["edge"])]
    assert {c["direction"] for c in touching} == {"to_host", "to_chip"}
    assert all(c["values_per_step"] > 0 for c in touching)
    assert parts["values_per_step"] >= sum(c["values_per_step"] for c in touching) > 0
    rows = {row["name"]: row for row in compiled.report["layers"]}
    assert all(rows[name].get("host") is True for name in products)


# -- the model itself ----------------------------------------------------------------------------------
def test_attention_depends_on_the_input(compiled):
    """Guards the fixed model bug: a binary residual stream made [x >= 0] always fire (constant attention)."""
    with np.load(INPUTS, allow_pickle=False) as z:
        x = z["input"].astype(np.float64)
    values = run(compiled.graph, x).values
    for entry in compiled.report["attention"]:
        out = values[entry["node"]]                  # [T, B, heads, N, d]
        assert not np.all(out == out[:, :1]), f"{entry['node']} is the same for every sample"


def test_checkpoint_accuracy_on_the_test_split(source):
    import importlib.util
    spec = importlib.util.spec_from_file_location("spikec_test_sdt_train", SDT / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    _, _, x_te, y_te = train.load_split()
    assert train.accuracy(source, x_te, y_te, source.steps) >= 0.85


# -- the ONNX target -----------------------------------------------------------------------------------
def test_onnx_target_is_spike_exact():
    from spikec.targets.onnx import EMITTERS
    assert all(op in EMITTERS for op in ATTENTION_OPS)
    r = compile_model(options(target="onnx")).report
    assert r["target"]["name"] == "onnx"
    assert r["target"]["spike_exact"] is True and r["target"]["equivalent"] is True
    assert r["target"]["spike_mismatches"] == 0 and r["target"]["spikes_compared"] > 0
    assert r["equivalent"] is True
