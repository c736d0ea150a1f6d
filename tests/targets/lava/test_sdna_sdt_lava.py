"""Products of two activations on the Lava target (issue 17): SDNA (examples/sdna) and the Spike-driven
Transformer (examples/sdt) compile with ``--target lava`` and run bit-exact in Lava's fixed-point simulation
against the integer reference; binary x binary products run on chip as AND neurons (Lava's standard LIF), products with an
integer or real operand on host partitions, and the report says which ran where. Inputs are cut to one sample
(and two steps for the event model) to keep each Lava run short."""
from pathlib import Path

import numpy as np
import pytest

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")

ROOT = Path(__file__).resolve().parents[3]
SDNA, SDT = ROOT / "examples" / "sdna", ROOT / "examples" / "sdt"


def _compile(model, weights, inputs, tmp_path, samples=1, steps=None):
    from spikec.app.driver import CompileOptions, compile_model
    with np.load(inputs) as z:
        x = z["input"][:steps, :samples]
    np.savez(tmp_path / "x.npz", input=x)
    c = compile_model(CompileOptions(model, weights=str(weights), inputs=str(tmp_path / "x.npz"), target="lava"))
    return c.report


def _bit_exact(report):
    t = report["target"]
    assert t["bit_exact"] is True, t["first_mismatches"]
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    assert report["equivalent"] is True
    assert t["products"]["rewrite_check"]["rewritten"] is True
    return t


def test_sdna_static_linear_is_bit_exact_with_products_on_host_and_windows_on_chip(tmp_path):
    t = _bit_exact(_compile(f"{SDNA / 'model.py'}:static_linear", SDNA / "static.pt", SDNA / "inputs_static.npz",
                            tmp_path))
    p = t["products"]
    # Q, K, V and the gate are integer (0..4) spikes: every product has an integer operand -> host
    assert p["binary_products_on_chip"] == []
    assert sorted(p["products_on_host"]) == sorted(["stages.0.0.sdna.attn.kv", "stages.0.0.sdna.attn",
                                                    "stages.1.1.sdna.attn.kv", "stages.1.1.sdna.attn"])
    # the window sum (times 1/9) is an all-equal depthwise Conv on chip feeding the gate neuron
    kinds = {x["name"]: x["type"] for x in t["processes"]}
    assert kinds["stages.0.0.sdna.attn.mean"] == "Conv" and kinds["stages.0.0.sdna.attn.gate"] == "SpikecIntFire"
    w = t["quantization"]["layers"]["stages.0.0.sdna.attn.gate"]
    assert w["streams"][0]["source"] == "stages.0.0.sdna.attn.kv"
    # integer host values cross exactly (gain 1) and are compared
    assert t["quantization"]["calibration"]["host_payload_gains"]["stages.0.0.sdna.attn.kv"] == 1.0
    assert t["host_values_compared"] > 0
    chip, host = p["per_inference"]["chip"], p["per_inference"]["host"]
    assert chip["spikes_per_inference"] > 0 and chip["synaptic_ops_per_inference"] > 0
    assert host["partitions"] == len(t["partitions"]["host"]) and host["multiply_accumulates_per_inference"] > 0


def test_sdna_event_pairwise_is_bit_exact_with_its_stateful_op_on_host(tmp_path):
    t = _bit_exact(_compile(f"{SDNA / 'model.py'}:event_pairwise", SDNA / "event.pt", SDNA / "inputs_event.npz",
                            tmp_path, steps=2))
    p = t["products"]
    assert p["products_on_host"] == ["stages.0.0.sdna.attn", "stages.1.1.sdna.attn"]
    assert all(x["op"] == "sdna_pairwise" and x["runs"] == "host" for x in p["placement"])
    ops = [o for h in t["partitions"]["host"] for o in h["ops"]]
    assert ops.count("sdna_pairwise") == 2


def test_stateful_host_op_is_given_its_history():
    """SDNA Pairwise's pair neurons leak over time: step t of the host op, given steps 0..t, is step t of the op
    run over the whole sequence (and differs from running step t alone, so a lost history would show)."""
    import torch
    from spikec.targets.lava import host
    import spikec.frontend.sdna  # noqa: F401
    from spikec.ops import OPS, KernelContext
    rng = np.random.default_rng(3)
    q, k, v = (rng.integers(0, 5, (4, 2, 3, 5, 5)).astype(np.float64) for _ in range(3))
    attrs = {"kernel": 3, "dilation": 1, "max_spikes": 4, "rounding": "round"}
    params = {"threshold": np.array(1.0), "beta": np.array(0.5), "alpha": np.array(0.5)}
    node = type("N", (), {"op": "sdna_pairwise", "name": "n", "attrs": attrs})()
    full = OPS["sdna_pairwise"].kernel(KernelContext(False, {}), node, {k_: torch.tensor(v_) for k_, v_ in
                                                                     params.items()},
                                       *(torch.from_numpy(a) for a in (q, k, v)))[0].numpy()
    for t in range(4):
        got = host.host_step("sdna_pairwise", attrs, params, t, [q[:t + 1], k[:t + 1], v[:t + 1]])
        assert np.array_equal(got, full[t])
    alone = host.host_step("sdna_pairwise", attrs, params, 0, [q[3:4], k[3:4], v[3:4]])
    assert not np.array_equal(alone, full[3])


def _product_model(seed):
    """``la(A x) * lb(B x)``: two LIF populations of 5 neurons (positive weights, so both fire often) and their
    element-wise product."""
    import torch
    from torch import nn
    import spikec.nn as snn

    class Product(nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(seed)
            self.a, self.b = snn.TimeDistributed(nn.Linear(6, 5)), snn.TimeDistributed(nn.Linear(6, 5))
            with torch.no_grad():
                for lin in (self.a[0], self.b[0]):
                    lin.weight.copy_(0.5 * torch.rand(5, 6, generator=g))
                    lin.bias.zero_()
            self.la, self.lb = snn.LIF(beta=0.5, threshold=1.0, reset="zero"), snn.LIF(beta=0.7, threshold=0.8)
            self.input_shape, self.steps = (6,), 8

        def forward(self, x):
            return self.la(self.a(x)) * self.lb(self.b(x))
    return Product().eval()


def _product_graph(batch=4, seed=0, density=0.5):
    from spikec.core.passes import run_passes
    from spikec.frontend import trace
    from spikec.passes import select
    model = _product_model(seed)
    x = (np.random.default_rng(seed).random((model.steps, batch, *model.input_shape)) < density).astype(np.float64)
    g = trace(model, model.input_shape, input_kind="binary")
    g, _ = run_passes(g, select("default")[0], x)
    return g, x


def test_binary_product_is_an_and_population_exact_in_the_integer_reference():
    """``la * lb`` of two LIF spike tensors: one AND neuron per element, fed by weight-1 synapses; in the integer
    reference its spikes are the product of the two populations' spikes, on random inputs."""
    from spikec.core.interpreter import run
    from spikec.targets.lava import deploy, products
    from spikec.targets.lava.ops import with_readouts
    g, x = _product_graph(batch=6, seed=1)
    mul = next(n for n in g.nodes if n.op == "mul")
    prep = products.prepare(g)
    assert [p["runs"] for p in prep.products] == ["chip"] and prep.graph.node(mul.name).op == "and_gate"
    assert products.check(g, run(g, x), run(prep.graph, x))["outputs_equal"] is True
    q, net, _ = deploy(g, x)
    kinds = {p["name"]: p["type"] for p in net["processes"]}
    assert kinds[mul.name] == "AND"   # Lava's standard LIF (du = dv = 4095, vth = 1)
    tr = run(with_readouts(q.graph), {"input": x.astype(np.int64)}, integer=True)
    a, b = (tr.values[i] for i in mul.inputs)
    assert np.array_equal(tr.values[mul.name], a * b) and (a * b).any() and (a != b).any()


def test_binary_product_runs_bit_exact_in_lava_and_is_chip_ready():
    from spikec.core.interpreter import run
    from spikec.targets.lava import compile_lava
    g, x = _product_graph(batch=3, seed=2)
    t = compile_lava(g, x, run(g, x), {}).report
    assert t["bit_exact"] is True, t["first_mismatches"]
    mul = next(n for n in g.nodes if n.op == "mul").name
    assert t["products"]["binary_products_on_chip"] == [mul]
    proc = next(p for p in t["processes"] if p["name"] == mul)
    assert proc["type"] == "AND" and proc["chip_ready"] is True
    assert t["products"]["per_inference"]["chip"]["and_neurons"] == 5
    assert f"products: 1 on chip as AND neurons ({mul}; 5 AND neurons, standard Lava LIF), 0 on host" in t["summary"]


def test_sdt_is_bit_exact_with_k_transpose_v_on_chip_as_and_neurons(tmp_path):
    """The reassociated ``Q (K^T V)``: K^T V's binary x binary products are AND neurons on chip (4 heads x 8 x 16
    tokens x 8), their sum over the 16 tokens a weight-1 Dense into a read-out (exact counts); ``Q (K^T V)``
    (binary x integer) and the scale on the host; the real-valued embedding (a conv of the real image) reads
    8-bit graded spikes."""
    t = _bit_exact(_compile(f"{SDT / 'model.py'}:small", SDT / "checkpoint.pt", SDT / "inputs.npz", tmp_path))
    p = t["products"]
    assert p["binary_products_on_chip"] == ["blocks.0.attn.matmul_1.kv"]
    assert p["products_on_host"] == ["blocks.0.attn.matmul_1"]
    chip = p["per_inference"]["chip"]
    assert chip["and_populations"] == ["blocks.0.attn.matmul_1.kv.and"] and chip["and_neurons"] == 4 * 8 * 16 * 8
    assert chip["and_spikes_per_inference"] > 0
    procs = {x["name"]: x for x in t["processes"]}
    assert procs["blocks.0.attn.matmul_1.kv.and"]["type"] == "AND"
    assert procs["blocks.0.attn.matmul_1.kv.and"]["chip_ready"] is True
    assert procs["blocks.0.attn.matmul_1.kv.count"]["type"] == "Readout"
    res = {r["name"]: r for r in t["resources"]["populations"]}
    assert res["blocks.0.attn.matmul_1.kv.and"]["neurons"] == 4096   # Loihi 2 resources count the AND neurons
    for name in ("blocks.0.attn.q_spike", "blocks.0.attn.k_spike", "blocks.0.attn.v_spike"):
        assert procs[name]["type"] in ("LIF", "SpikecLIF")
    layers = t["quantization"]["layers"]
    assert layers["blocks.0.attn.matmul_1.kv.count"]["scaling"].startswith("none: a count of AND spikes")
    count = t["float_vs_fixed"]["per_layer"]["blocks.0.attn.matmul_1.kv.count"]
    assert "class_agreement" not in count and count["scale"] == 1.0   # a count, not a classifier
    host = t["partitions"]["host"]
    assert len(host) == 1 and "matmul" in host[0]["ops"] and t["host_values_compared"] > 0
    assert not t["overflow"]


def _or_window_in_lava(channels: int) -> np.ndarray:
    """Spikes per step of a LIF OR layer (du = dv = 4095, vth = 0) behind a depthwise all-ones 2x2 Conv with
    ``channels`` groups, on random binary spikes, in Lava's fixed-point simulation."""
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.magma.core.run_conditions import RunSteps
    from lava.magma.core.run_configs import Loihi2SimCfg
    from lava.proc.conv.process import Conv
    from lava.proc.io.source import RingBuffer
    from lava.proc.lif.process import LIF
    from lava.proc.monitor.process import Monitor
    x = (np.random.default_rng(0).random((4, 4, channels, 3)) < 0.5).astype(np.int64)
    src = RingBuffer(data=x)
    conv = Conv(weight=np.ones((channels, 2, 2, 1), dtype=np.int64), input_shape=(4, 4, channels), stride=(2, 2),
                padding=(0, 0), dilation=(1, 1), groups=channels, num_message_bits=0)
    lif = LIF(shape=(2, 2, channels), du=4095, dv=4095, vth=0, bias_mant=0, bias_exp=0)
    src.s_out.connect(conv.s_in)
    conv.a_out.connect(lif.a_in)
    mon = Monitor()
    mon.probe(lif.s_out, 3)
    lif.run(condition=RunSteps(num_steps=3), run_cfg=Loihi2SimCfg(select_tag="fixed_pt"))
    try:
        return mon.get_data()[lif.name]["s_out"].reshape(3, -1).sum(1)
    finally:
        lif.stop()


def test_conv_groups_beyond_int8_are_chunked_and_refused():
    """Lava 0.10's Conv keeps ``groups`` in an int8 Var: 128 groups (16 channels x 8 samples side by side, as the
    full SDNA inputs fold) wrap to -128 and the Conv sends nothing. Spikec runs at most 127 // groups samples per
    network, and refuses to build a Conv beyond it."""
    from spikec.ir.errors import BadInput
    from spikec.targets.lava.build import _build_synapse
    from spikec.targets.lava.simulate import MAX_CONV_GROUPS, batch_chunk
    assert _or_window_in_lava(127)[1:].min() > 0 and _or_window_in_lava(128).sum() == 0
    net = {"processes": [{"type": "Conv", "groups": 16, "name": "c"}]}
    assert batch_chunk(net, {}, 8) == 7 == MAX_CONV_GROUPS // 16 and batch_chunk(net, {}, 3) == 3
    p = {"type": "Conv", "name": "c", "groups": 16, "input_lava_shape": [4, 4, 16], "stride": [2, 2],
         "padding": [0, 0], "dilation": [1, 1], "num_message_bits": 0}
    with pytest.raises(BadInput) as e:
        _build_synapse(p, {"c/weight": np.ones((16, 2, 2, 1), dtype=np.int64)}, 8)
    assert "'c'" in str(e.value) and "int8" in str(e.value)


def test_a_binary_product_too_large_for_and_neurons_goes_to_the_host(monkeypatch):
    from spikec.targets.lava import deploy, products
    g, x = _product_graph(batch=2, seed=1)
    monkeypatch.setattr(products, "MAX_AND_NEURONS", 4)   # the product needs 5
    prep = products.prepare(g)
    assert [p["runs"] for p in prep.products] == ["host"] and "5 AND neurons" in prep.products[0]["why"]
    mul = next(n for n in g.nodes if n.op == "mul").name
    from spikec.ir.errors import UnsupportedOp
    with pytest.raises(UnsupportedOp) as e:   # a host value is not recorded as a graph output: refused, by name
        deploy(g, x)
    assert repr(mul) in str(e.value)
