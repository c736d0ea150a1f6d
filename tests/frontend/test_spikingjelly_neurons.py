"""SpikingJelly's IFNode, LIFNode and ParametricLIFNode converted alone (spikec.frontend.spikingjelly) in both step
modes, against the SpikingJelly module itself on random inputs: float64 spikes and membranes bit for bit."""
import itertools
import zlib
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import convert_one, run_converted
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run

SHAPE = (4, 3, 3)  # per-step (C, H, W)
SEEDS = 3          # random draws (threshold, tau or w, T, inputs) per variant


@pytest.fixture(scope="module")
def sj():
    neuron = pytest.importorskip("spikingjelly.activation_based.neuron",
                                 reason="SpikingJelly is an optional extra (pip install --no-deps spikingjelly loguru)")
    from spikingjelly.activation_based import functional, surrogate
    return SimpleNamespace(neuron=neuron, functional=functional, surrogate=surrogate)


def sj_run(sj, module, x):
    """The module's own float64 forward after reset_net: one call on [T, B, ...] ('m') or one call per step ('s');
    returns the spikes and the post-reset membrane sequence (store_v_seq)."""
    module.double()
    sj.functional.reset_net(module)
    with torch.no_grad():
        xt = torch.from_numpy(x)
        out = module(xt) if module.step_mode == "m" else torch.stack([module(x_t) for x_t in xt])
    return out.numpy(), module.v_seq.numpy()


def check_exact(sj, module, x, op):
    """Convert ``module`` as its step mode is traced, run the IR and the module; spikes identical, and where the
    neuron stays silent its stored membrane is the charged H, whose distance to threshold the IR reports."""
    ctx, out = convert_one(module, SHAPE, "multistep" if module.step_mode == "m" else "step")
    graph, (got,) = run_converted(ctx, [out], x)
    (node,) = [n for n in graph.nodes if n.op != "input"]
    assert node.op == op
    want, v_seq = sj_run(sj, module, x)
    assert np.array_equal(got, want)
    quiet = want == 0
    margins = run(graph, x).margins[node.name]
    assert np.array_equal(margins[quiet], np.abs(v_seq - float(module.v_threshold))[quiet])
    return got


def draws(case, gain=lambda rng: 1.0):
    """SEEDS random (rng, threshold, x) per case: T in 1..16, inputs around the threshold times ``gain``."""
    for seed in range(SEEDS):
        rng = np.random.default_rng(zlib.crc32(repr((case, seed)).encode()))
        theta = float(rng.uniform(0.4, 1.6))
        steps = int(rng.integers(1, 17))
        yield rng, theta, lambda g: rng.normal(0.3, 1.5, size=(steps, 2, *SHAPE)) * theta * g


def assert_busy(spike_list):
    rate = np.concatenate([s.ravel() for s in spike_list]).mean()
    assert 0.05 < rate < 0.95, rate


MODES = ("m", "s")
RESETS = (0.0, None, -0.3)


@pytest.mark.parametrize("mode,v_reset", list(itertools.product(MODES, RESETS + (0.25,))))
def test_if_node(sj, mode, v_reset):
    spikes = []
    for rng, theta, x in draws(("if", mode, v_reset)):
        node = sj.neuron.IFNode(v_threshold=theta, v_reset=v_reset, step_mode=mode, store_v_seq=True)
        spikes.append(check_exact(sj, node, x(1.0), "lif" if v_reset in (0.0, None) else "lif_sj"))
    assert_busy(spikes)


@pytest.mark.parametrize("mode,tau,decay_input,v_reset",
                         list(itertools.product(MODES, (2.0, 3.7, "random"), (True, False), RESETS)))
def test_lif_node(sj, mode, tau, decay_input, v_reset):
    spikes = []
    for rng, theta, x in draws(("lif", mode, tau, decay_input, v_reset)):
        t = float(rng.uniform(1.1, 9.0)) if tau == "random" else tau
        node = sj.neuron.LIFNode(tau=t, decay_input=decay_input, v_threshold=theta, v_reset=v_reset,
                                 step_mode=mode, store_v_seq=True)
        op = "lif" if t == 2.0 and not decay_input and v_reset in (0.0, None) else "lif_sj"
        spikes.append(check_exact(sj, node, x(t if decay_input else 1.0), op))  # decay_input divides x by tau
    assert_busy(spikes)


@pytest.mark.parametrize("mode,w,decay_input,v_reset",
                         list(itertools.product(MODES, ("init", "trained"), (True, False), RESETS)))
def test_parametric_lif_node(sj, mode, w, decay_input, v_reset):
    """decay = sigmoid(w) multiplies (no division by tau); 'trained' sets w to an arbitrary value."""
    spikes = []
    for rng, theta, x in draws(("plif", mode, w, decay_input, v_reset)):
        node = sj.neuron.ParametricLIFNode(init_tau=float(rng.uniform(1.1, 9.0)), decay_input=decay_input,
                                           v_threshold=theta, v_reset=v_reset, step_mode=mode, store_v_seq=True)
        if w == "trained":
            with torch.no_grad():
                node.w.fill_(float(rng.normal(0.0, 1.5)))
        k = float(node.w.detach().double().sigmoid())
        spikes.append(check_exact(sj, node, x(1 / k if decay_input else 1.0), "lif_sj"))
    assert_busy(spikes)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("make", ["if", "lif", "plif"])
def test_fires_on_ties(sj, make, mode):
    """Dyadic inputs make H == threshold exactly: SpikingJelly fires on H >= threshold, and so does the IR."""
    n = sj.neuron
    node = {"if": lambda: n.IFNode(v_reset=None, step_mode=mode, store_v_seq=True),
            "lif": lambda: n.LIFNode(tau=2.0, v_reset=None, step_mode=mode, store_v_seq=True),
            "plif": lambda: n.ParametricLIFNode(init_tau=2.0, v_reset=None, step_mode=mode, store_v_seq=True)}[make]()
    x = np.random.default_rng(9).integers(0, 5 if make == "if" else 9, size=(16, 2, *SHAPE)) / 4.0
    ctx, out = convert_one(node, SHAPE, "multistep" if mode == "m" else "step")
    graph, _ = run_converted(ctx, [out], x)
    got = run(graph, x)
    (ir_node,) = [nd for nd in graph.nodes if nd.op != "input"]
    assert (got.margins[ir_node.name] == 0).sum() > 0
    assert_busy([check_exact(sj, node, x, ir_node.op)])


@pytest.mark.parametrize("make", ["if", "lif", "plif"])
def test_detach_reset_and_store_v_seq_leave_the_graph_alone(sj, make):
    cls = {"if": sj.neuron.IFNode, "lif": sj.neuron.LIFNode, "plif": sj.neuron.ParametricLIFNode}[make]
    graphs = []
    for detach, store in ((False, False), (True, True)):
        node = cls(v_reset=-0.3, detach_reset=detach, store_v_seq=store, step_mode="m")
        ctx, _ = convert_one(node, SHAPE, "multistep")
        graphs.append([(n.op, n.attrs, {k: v.tolist() for k, v in n.params.items()}) for n in ctx.nodes])
    assert graphs[0] == graphs[1]


@pytest.mark.parametrize("name", sorted(__import__("spikec.frontend.spikingjelly", fromlist=["x"]).SJ_HEAVISIDE))
def test_accepted_surrogates_fire_on_heaviside(sj, name):
    """Every surrogate the converter accepts computes (x >= 0) in its spiking forward, in this SpikingJelly."""
    sg = getattr(sj.surrogate, name)()
    x = torch.tensor([-2.0, -1e-300, -0.0, 0.0, 1e-300, 0.5], dtype=torch.float64)
    assert torch.equal(sg(x), (x >= 0).to(x))
    node = sj.neuron.IFNode(v_reset=0.25, surrogate_function=sg, step_mode="s", store_v_seq=True)
    check_exact(sj, node, np.random.default_rng(3).normal(0.3, 1.5, size=(6, 2, *SHAPE)), "lif_sj")


# -- refusals: one each --------------------------------------------------------------------
def refused(module, stepping, match):
    with pytest.raises(UnsupportedOp, match=f"(?s){match}"):
        convert_one(module, SHAPE, stepping)


def test_refuses_single_step_neuron_in_multistep_trace(sj):
    refused(sj.neuron.LIFNode(step_mode="s"), "multistep", r"step_mode='s'.*set_step_mode\(net, 'm'\)")


def test_refuses_multi_step_neuron_in_step_trace(sj):
    refused(sj.neuron.IFNode(step_mode="m"), "step", r"step_mode='m'.*set_step_mode\(net, 's'\)")


def test_refuses_subclass(sj):
    class Mine(sj.neuron.IFNode):
        pass
    refused(Mine(step_mode="m"), "multistep", "subclasses of IFNode")


def test_refuses_custom_surrogate(sj):
    class Mine(sj.surrogate.Sigmoid):  # a user's class: its forward is not known to be heaviside
        pass
    node = sj.neuron.IFNode(surrogate_function=Mine(), step_mode="m")
    refused(node, "multistep", "surrogate .*Mine .*surrogate.Sigmoid")


def test_refuses_non_heaviside_surrogate(sj):
    sg = sj.surrogate.PoissonPass()
    refused(sj.neuron.IFNode(surrogate_function=sg, step_mode="m"), "multistep", "surrogate PoissonPass")


def test_refuses_surrogate_out_of_spiking_mode(sj):
    sg = sj.surrogate.Sigmoid(spiking=False)  # forward is the smooth sigmoid itself
    refused(sj.neuron.LIFNode(surrogate_function=sg, step_mode="m"), "multistep", "surrogate Sigmoid")


def test_refuses_reduced_neuron_precision(sj):
    node = sj.neuron.LIFNode(step_mode="m")
    node._neuron_precision = (torch.float16, "fp32", "fp32")
    refused(node, "multistep", "neuron precision")


def test_refuses_per_channel_threshold(sj):
    node = sj.neuron.IFNode(step_mode="m")
    node.v_threshold = torch.ones(SHAPE[0])
    refused(node, "multistep", "v_threshold=.* is not one real number")


def test_refuses_v_reset_changed_after_construction(sj):
    node = sj.neuron.LIFNode(v_reset=0.0, step_mode="m")
    node.v_reset = 0.5  # reset_net still restores v to 0.0
    refused(node, "multistep", "reset_net restores the membrane to 0.0")


def test_refuses_non_scalar_plif_w(sj):
    node = sj.neuron.ParametricLIFNode(step_mode="m")
    node.w = nn.Parameter(torch.zeros(SHAPE[0]))
    refused(node, "multistep", "w has shape")


def test_refuses_neuron_inside_a_per_step_context(sj):
    ctx_module = sj.neuron.IFNode(step_mode="m")
    from spikec.frontend.registry import ConvertContext
    from spikec.ir.graph import Node, TensorType
    ctx = ConvertContext(per_step=True, stepping="multistep")  # inside TimeDistributed / SeqToANNContainer
    ctx.nodes.append(Node("input", "input", (), TensorType(SHAPE, "real")))
    ctx.types["input"] = ctx.nodes[0].type
    with pytest.raises(UnsupportedOp, match="(?s)T\\*B as time.*outside layer.SeqToANNContainer"):
        ctx.convert_module(ctx_module, "neuron", "input")
