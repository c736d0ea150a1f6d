"""``model.onnx`` as a loop (one Scan over T around the one-step graph): its size does not grow with T, and it is
spike-exact in onnxruntime against the interpreter (the target's own check, every IR value probed) for framework
networks as their users write them, on real-valued and on random binary inputs; graphs the step form refuses
fall back to the unrolled model, the reason in the report."""
import numpy as np
import onnx
import pytest
import torch
from torch import nn

import spikec
import spikec.nn as snn
from spikec.core.interpreter import run
from spikec.ir.graph import TensorType
from spikec.targets import get_target
from spikec.targets.onnx import export, form_of, run_model
from spikec.targets.onnx.loop import node_count
from test_onnx_ops import LIF_PER_CHANNEL, build, dyadic, rng

snntorch = pytest.importorskip("snntorch")
norse = pytest.importorskip("norse.torch")

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def lif_chain():
    """x -> lif -> tdm -> delay(2) -> lif: neurons, a previous-input state and a delay buffer."""
    lif = {k: np.asarray(v, dtype=np.float64) for k, v in LIF_PER_CHANNEL.items()}
    return build(TensorType((3, 4)), [
        ("lif1", "lif", ("x",), {"reset": "subtract"}, lif),
        ("tdm", "tdm", ("lif1",), {}, {"lam": np.array([0.5, 0.25, 0.125])}),
        ("late", "delay", ("tdm",), {"steps": 2}, {}),
        ("lif2", "lif", ("late",), {"reset": "zero"}, lif)])


def test_node_count_does_not_grow_with_T():
    """T=8 and T=64: the loop model's nodes (its body included) are the same; the unrolled model's grow, so this
    comparison fails on the unrolled form."""
    g = lif_chain()
    loop = {T: export(g, T) for T in (8, 64)}
    unrolled = {T: export(g, T, form="unrolled") for T in (8, 64)}
    assert all(form_of(m) == ("loop", None) for m in loop.values())
    assert node_count(loop[64]) <= 1.1 * node_count(loop[8])
    assert node_count(unrolled[64]) > 1.1 * node_count(unrolled[8]), "the comparison tells the two forms apart"
    x = dyadic(rng(0), (64, 3, 3, 4))
    assert np.array_equal(run_model(loop[64], {"x": x})["lif2"], run(g, x).values["lif2"])


def compiled(model, x, **kw):
    c = spikec.compile(model, x, targets=("onnx",), **kw)
    t = c.targets["onnx"]
    assert c.equivalent and t["equivalent"] and t["spike_exact"], t.get("first_mismatches")
    assert t["spike_mismatches"] == 0 and t["max_rel_diff"] <= 1e-9 and t["probe_outputs_match_plain"]
    assert t["nodes_compared"] == len(c.graph.nodes) - 1
    return c, t


def real_and_random(shape, seed, scale=1.5):
    """Real-valued inputs (dyadic: exact sums) and random binary spikes, both [T, B, ...]."""
    r = np.random.default_rng(seed)
    return {"real": np.floor(r.random(shape) * scale * 16) / 16, "random": (r.random(shape) < 0.4).astype(np.float64)}


def assert_loop_and_exact(model, x, **kw):
    c, t = compiled(model, x, **kw)
    assert t["form"] == "loop" and t["form_reason"] is None, t
    assert t["spikes_compared"] > 0
    return c, t


class LeakyNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.lif1 = nn.Linear(12, 10), snntorch.Leaky(beta=0.9, threshold=0.5, init_hidden=True)
        self.fc2, self.lif2 = nn.Linear(10, 4), snntorch.Leaky(beta=0.8, threshold=0.3, init_hidden=True)

    def forward(self, x):
        return self.lif2(self.fc2(self.lif1(self.fc1(x))))


class RLeakyNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc1 = nn.Linear(12, 8)
        self.rlif = snntorch.RLeaky(beta=0.85, linear_features=8, threshold=0.3, init_hidden=True)
        self.fc2, self.lif = nn.Linear(8, 4), snntorch.Leaky(beta=0.9, threshold=0.3, init_hidden=True)

    def forward(self, x):
        return self.lif(self.fc2(self.rlif(self.fc1(x))))


class NorseRecurrent(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.rec = norse.LIFRecurrent(12, 8, norse.LIFParameters(v_th=torch.tensor(0.3)), dt=2e-3)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        z, _ = self.rec(x)
        return self.out(z)


def td(*m):
    return snn.TimeDistributed(*m)


class ConvNet(nn.Module):
    input_shape = (2, 8, 8)

    def __init__(self, steps=None):
        super().__init__()
        torch.manual_seed(3)
        self.conv1, self.lif1 = td(nn.Conv2d(2, 4, 3, padding=1)), snn.LIF(beta=0.5, threshold=0.5)
        self.pool = td(nn.AvgPool2d(2))
        self.conv2, self.lif2 = td(nn.Conv2d(4, 4, 3, padding=1)), snn.LIF(beta=0.75, threshold=0.5, reset="zero")
        self.bntt = snn.BNTT(4, steps) if steps else None
        self.head = td(nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
        self.lif3 = snn.LIF(beta=0.9, threshold=0.25)
        if steps:   # per-step statistics, a scale that differs at every step: stays a bntt (not a bias schedule)
            with torch.no_grad():
                self.bntt.weight.copy_(torch.rand(steps, 4) + 0.5)
                self.bntt.bias.copy_(torch.randn(steps, 4) * 0.3)
                self.bntt.running_mean.copy_(torch.randn(steps, 4) * 0.2)
                self.bntt.running_var.copy_(torch.rand(steps, 4) + 0.5)

    def forward(self, x):
        s = self.pool(self.lif1(self.conv1(x)))
        y = self.conv2(s)
        return self.lif3(self.head(self.lif2(self.bntt(y) if self.bntt is not None else y)))


@pytest.mark.parametrize("inputs", ["real", "random"])
def test_snntorch_leaky_net(inputs):
    c, _ = assert_loop_and_exact(LeakyNet().double(), real_and_random((10, 3, 12), 0)[inputs], stepping="step")
    assert "lif_snntorch" in {n.op for n in c.graph.nodes}


@pytest.mark.parametrize("inputs", ["real", "random"])
def test_conv_net(inputs):
    c, _ = assert_loop_and_exact(ConvNet().eval(), real_and_random((6, 2, 2, 8, 8), 1)[inputs])
    assert "conv2d" in {n.op for n in c.graph.nodes}


@pytest.mark.parametrize("net", [RLeakyNet, NorseRecurrent], ids=["rleaky", "norse_lif_recurrent"])
@pytest.mark.parametrize("inputs", ["real", "random"])
def test_recurrent_net(net, inputs):
    stepping = "step" if net is RLeakyNet else "auto"
    c, _ = assert_loop_and_exact(net().double(), real_and_random((10, 3, 12), 2, scale=3.0)[inputs],
                                 stepping=stepping)
    assert {n.op for n in c.graph.nodes} & {"rleaky_snntorch", "lif_recurrent_norse"}


@pytest.mark.parametrize("inputs", ["real", "random"])
def test_per_step_tables(inputs):
    """bntt (per-step scale) without folding, and a bias schedule (step_bias: BNTT folded into the conv); the loop
    gathers each step's row at the step index it carries."""
    x = real_and_random((5, 2, 2, 8, 8), 3)[inputs]
    c, _ = assert_loop_and_exact(ConvNet(steps=5).eval(), x, passes="none")
    assert "bntt" in {n.op for n in c.graph.nodes}
    rules = spikec.compile("examples/rules/model.py:rules", (np.random.default_rng(4).random((4, 2, 1, 8, 8)) < 0.4)
                           .astype(np.float64), targets=("onnx",))
    t = rules.targets["onnx"]
    assert "step_bias" in {n.op for n in rules.graph.nodes}
    assert rules.equivalent and t["spike_exact"] and t["form"] == "loop", t.get("first_mismatches")


class IntFireNet(nn.Module):
    input_shape = (2, 6, 6)

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.conv, self.q = td(nn.Conv2d(2, 3, 3, padding=1)), snn.IntFire(threshold=0.5, max_spikes=3)
        self.head, self.lif = td(nn.Flatten(), nn.Linear(3 * 36, 4)), snn.LIF(beta=0.9, threshold=0.5)

    def forward(self, x):
        return self.lif(self.head(self.q(self.conv(x))))


def test_virtual_sub_steps_fall_back_to_unrolled_with_the_reason():
    """unroll_virtual_steps (a default pass) replays each step as D sub-steps: the step form refuses, model.onnx is
    the unrolled model, still exact, and the report says why."""
    c, t = compiled(IntFireNet().eval(), real_and_random((4, 2, 2, 6, 6), 6, scale=3.0)["real"])
    assert "intfire_unrolled" in {n.op for n in c.graph.nodes}
    assert t["form"] == "unrolled" and "intfire_unrolled" in t["form_reason"] and "no one-step form" in t["form_reason"]
    assert t["streaming"]["written"] is False


def test_the_target_on_a_hand_built_graph_reports_the_loop_and_verify_reads_it(tmp_path):
    """The target's model.onnx, written and read back by its verifier, is the loop form (metadata says so)."""
    from spikec.targets import VERIFIERS
    g = lif_chain()
    x = dyadic(rng(7), (6, 2, 3, 4))
    ref = run(g, x)
    res = get_target("onnx")(g, x, ref, {})
    assert res.ok and res.report["form"] == "loop" and res.report["onnx_nodes"] > res.report["onnx_nodes_outer"]
    for name, write in res.files.items():
        write(tmp_path / name)
    assert form_of(onnx.load(str(tmp_path / "model.onnx")))[0] == "loop"
    v = VERIFIERS["onnx"](tmp_path, g, x, ref)
    assert v["equivalent"] and v["form"] == "loop" and v["streaming"]["equivalent"]


def test_an_edited_loop_model_is_not_equivalent_and_verify_goes_on(tmp_path):
    """A loop model.onnx whose body prefix was removed: a verdict (not equivalent, naming the file), not a refusal
    that would take the other targets' checks down (review)."""
    from spikec.targets import VERIFIERS
    g = lif_chain()
    x = dyadic(rng(7), (6, 2, 3, 4))
    ref = run(g, x)
    res = get_target("onnx")(g, x, ref, {})
    for name, write in res.files.items():
        write(tmp_path / name)
    model = onnx.load(str(tmp_path / "model.onnx"))
    kept = [p for p in model.metadata_props if p.key != "spikec.loop_prefix" and "prefix" not in p.key]
    assert len(kept) < len(model.metadata_props)
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.save(model, str(tmp_path / "model.onnx"))
    v = VERIFIERS["onnx"](tmp_path, g, x, ref)
    assert v["equivalent"] is False and "edited" in str(v)
