"""snnTorch Leaky and SpikingJelly LIF/IF through the frontend: bit-exact against the libraries in float64."""
import itertools
import zlib

import numpy as np
import pytest
import torch
from torch import nn

import spikec.compiler.converters_extra as extra
import spikec.nn as snc
from spikec.compiler.errors import UnsupportedOp
from spikec.compiler.frontend import trace
from spikec.compiler.interpreter import run

N_IN, HIDDEN, N_OUT = 6, 12, 4


@pytest.fixture
def snntorch():
    return pytest.importorskip("snntorch", reason="snnTorch is an optional extra")


@pytest.fixture
def sj():
    neuron = pytest.importorskip("spikingjelly.activation_based.neuron",
                                 reason="SpikingJelly is an optional extra (pip install --no-deps spikingjelly loguru)")
    from spikingjelly.activation_based import functional, surrogate
    return neuron, functional, surrogate


def dense(neuron_module):
    torch.manual_seed(0)
    return nn.Sequential(snc.TimeDistributed(nn.Linear(N_IN, HIDDEN)), neuron_module,
                         snc.TimeDistributed(nn.Linear(HIDDEN, N_OUT)))


def compare(model, x, shape=(N_IN,), reset=lambda: None):
    """Trace, run the IR and the float64 model on ``x``; outputs must be identical. Returns the trace."""
    graph = trace(model, input_shape=shape, input_kind="real")
    got = run(graph, x)
    model.double()
    reset()
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    assert np.array_equal(got.outputs(graph)[0], want)
    return graph, got


def neuron_spikes(graph, got, ops=("lif", "lif_snntorch", "lif_sj")):
    (node,) = [n for n in graph.nodes if n.op in ops]
    return node, got.values[node.name]


def assert_busy(spikes):
    """Many spikes and many silences, so that firing and reset are both exercised."""
    assert 0.05 < spikes.mean() < 0.95, spikes.mean()


def steps_for(*case):
    """A number of steps in 1..16 that differs between cases but not between runs."""
    return 1 + zlib.crc32(repr(case).encode()) % 16


def inputs(seed, steps, scale=2.0, shape=(N_IN,)):
    rng = np.random.default_rng(seed)
    return rng.normal(0.3, scale, size=(steps, 3, *shape))


# -- snnTorch --------------------------------------------------------------------------------
BETAS = {"scalar": lambda: 0.8, "per_neuron": lambda: torch.linspace(-0.2, 1.3, HIDDEN),  # clamped to [0, 1]
         "learnable": lambda: torch.full((HIDDEN,), 0.9)}
RESETS = ("subtract", "zero", "none")


@pytest.mark.parametrize("reset,beta,delay", list(itertools.product(RESETS, BETAS, (True, False))))
def test_leaky_is_exact(snntorch, reset, beta, delay):
    leaky = snntorch.Leaky(beta=BETAS[beta](), threshold=0.7, reset_mechanism=reset, reset_delay=delay,
                           learn_beta=beta == "learnable")
    steps = steps_for(reset, beta, delay)
    graph, got = compare(dense(extra.SnnTorchMultiStep(leaky)), inputs(1, steps))
    node, spikes = neuron_spikes(graph, got)
    assert node.op == ("lif" if reset == "zero" and delay else "lif_snntorch")
    if steps > 1:
        assert_busy(spikes)


@pytest.mark.parametrize("reset,beta", list(itertools.product(RESETS, BETAS)))
def test_leaky_membrane_is_bit_exact(snntorch, reset, beta):
    """The IR's firing margins |U - threshold| equal snnTorch's own membrane, step by step."""
    threshold = torch.tensor(0.3, dtype=torch.float64)  # not a float32: snnTorch's reset rounds it
    leaky = snntorch.Leaky(beta=BETAS[beta](), threshold=threshold, reset_mechanism=reset,
                           learn_beta=beta == "learnable")
    x = inputs(10, 16, shape=(HIDDEN,))
    graph, got = compare(nn.Sequential(extra.SnnTorchMultiStep(leaky)), x, shape=(HIDDEN,))
    mem, mems = torch.zeros(x.shape[1:], dtype=torch.float64), []  # explicit: Leaky keeps its last state
    with torch.no_grad():
        for x_t in torch.from_numpy(x):
            _, mem = leaky(x_t, mem)
            mems.append(mem.numpy())
    node, spikes = neuron_spikes(graph, got)
    assert np.array_equal(got.margins[node.name], np.abs(np.stack(mems) - node.params["threshold"]))
    assert_busy(spikes)


def test_leaky_long_run_fires_and_resets(snntorch):
    leaky = snntorch.Leaky(beta=0.95, threshold=1.2)
    graph, got = compare(dense(extra.SnnTorchMultiStep(leaky)), inputs(2, 16))
    _, spikes = neuron_spikes(graph, got)
    assert_busy(spikes)
    assert (spikes.sum(0) >= 2).any()  # neurons that fire again after a reset


@pytest.mark.parametrize("reset", RESETS)
def test_leaky_strict_threshold_on_ties(snntorch, reset):
    """Dyadic inputs hit U == threshold exactly; snnTorch fires only on U > threshold."""
    leaky = snntorch.Leaky(beta=0.5, threshold=1.0, reset_mechanism=reset)
    x = np.random.default_rng(3).integers(0, 5, size=(16, 4, 8)) / 4.0
    graph, got = compare(nn.Sequential(extra.SnnTorchMultiStep(leaky)), x, shape=(8,))
    node, spikes = neuron_spikes(graph, got)
    assert (got.margins[node.name] <= 1e-15).sum() > 0  # ties (lif measures at nextafter(1.0))
    assert_busy(spikes)


def test_leaky_learnable_threshold_graded_and_hidden_state(snntorch):
    leaky = snntorch.Leaky(beta=0.9, threshold=torch.linspace(0.3, 1.5, HIDDEN), learn_threshold=True,
                           graded_spikes_factor=0.37, init_hidden=True, output=True)
    graph, got = compare(dense(extra.SnnTorchMultiStep(leaky)), inputs(4, 12))
    assert [n.op for n in graph.nodes].count("scale") == 1
    _, spikes = neuron_spikes(graph, got)
    assert_busy(spikes)


def test_leaky_per_channel_after_conv(snntorch):
    torch.manual_seed(1)
    beta = torch.tensor([0.5, 0.9, 1.0]).view(3, 1, 1)
    model = nn.Sequential(snc.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1)),
                          extra.SnnTorchMultiStep(snntorch.Leaky(beta=beta, threshold=0.5)))
    graph, got = compare(model, inputs(6, 7, shape=(2, 5, 5)), shape=(2, 5, 5))
    assert_busy(neuron_spikes(graph, got)[1])


def test_leaky_refusals(snntorch):
    torch.manual_seed(0)
    with pytest.raises(UnsupportedOp, match="not snntorch.Leaky"):
        trace(dense(extra.SnnTorchMultiStep(snntorch.DeltaLeaky(beta=0.9))), input_shape=(N_IN,))
    with pytest.raises(UnsupportedOp, match="inhibition"):
        trace(dense(extra.SnnTorchMultiStep(snntorch.Leaky(beta=0.9, inhibition=True))), input_shape=(N_IN,))
    per_neuron = snntorch.Leaky(beta=torch.rand(3, 5, 5))
    model = nn.Sequential(snc.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1)), extra.SnnTorchMultiStep(per_neuron))
    with pytest.raises(UnsupportedOp, match="per-channel"):
        trace(model, input_shape=(2, 5, 5))
    inside = snc.TimeDistributed(nn.Linear(N_IN, HIDDEN), extra.SnnTorchMultiStep(snntorch.Leaky(beta=0.9)))
    with pytest.raises(UnsupportedOp, match="TimeDistributed"):
        trace(inside, input_shape=(N_IN,))


# -- SpikingJelly ------------------------------------------------------------------------------
@pytest.mark.parametrize("tau,decay_input,v_reset,threshold",
                         list(itertools.product((2.0, 3.7), (True, False), (0.0, None, -0.3), (1.0, 0.7))))
def test_sj_lif_is_exact(sj, tau, decay_input, v_reset, threshold):
    neuron, functional, _ = sj
    node = neuron.LIFNode(tau=tau, decay_input=decay_input, v_reset=v_reset, v_threshold=threshold, step_mode="m")
    model = dense(node)
    steps = steps_for(tau, decay_input, v_reset, threshold)
    x = inputs(7, steps, scale=2.0 * tau if decay_input else 2.0)  # decay_input divides x by tau
    graph, got = compare(model, x, reset=lambda: functional.reset_net(model))
    ir_node, spikes = neuron_spikes(graph, got)
    assert ir_node.op == "lif_sj"
    if steps > 1:
        assert_busy(spikes)


@pytest.mark.parametrize("v_reset,op", [(None, "lif"), (0.0, "lif"), (0.25, "lif_sj")])
def test_sj_if_is_exact(sj, v_reset, op):
    neuron, functional, surrogate = sj
    node = neuron.IFNode(v_threshold=0.8, v_reset=v_reset, surrogate_function=surrogate.ATan(), step_mode="m")
    model = dense(node)
    graph, got = compare(model, inputs(8, 16), reset=lambda: functional.reset_net(model))
    ir_node, spikes = neuron_spikes(graph, got)
    assert ir_node.op == op
    assert_busy(spikes)


@pytest.mark.parametrize("make", ["if", "lif"])
def test_sj_fires_on_ties(sj, make):
    """Dyadic inputs hit H == threshold exactly; SpikingJelly fires on H >= threshold."""
    neuron, functional, _ = sj
    node = (neuron.IFNode(v_reset=None, step_mode="m") if make == "if"
            else neuron.LIFNode(tau=2.0, v_reset=None, step_mode="m"))
    x = np.random.default_rng(9).integers(0, 5 if make == "if" else 9, size=(16, 4, 8)) / 4.0  # LIF halves x
    graph, got = compare(nn.Sequential(node), x, shape=(8,), reset=lambda: functional.reset_net(node))
    ir_node, spikes = neuron_spikes(graph, got)
    assert (got.margins[ir_node.name] == 0).sum() > 0
    assert_busy(spikes)


@pytest.mark.parametrize("make,decay_input,v_reset", [("lif", True, None), ("lif", True, 0.0), ("lif", True, -0.3),
                                                      ("lif", False, -0.3), ("lif", False, None), ("if", False, 0.25),
                                                      ("if", False, None)])
def test_sj_membrane_is_bit_exact(sj, make, decay_input, v_reset):
    """Where no spike fires, SpikingJelly's stored voltage is its charged H: the IR's margin is |H - threshold|."""
    neuron, functional, _ = sj
    node = (neuron.LIFNode(tau=3.7, decay_input=decay_input, v_reset=v_reset, v_threshold=0.7, step_mode="m",
                           store_v_seq=True) if make == "lif"
            else neuron.IFNode(v_reset=v_reset, v_threshold=0.7, step_mode="m", store_v_seq=True))
    x = inputs(11, 16, scale=4.0, shape=(HIDDEN,))
    graph, got = compare(nn.Sequential(node), x, shape=(HIDDEN,), reset=lambda: functional.reset_net(node))
    ir_node, spikes = neuron_spikes(graph, got)
    quiet = spikes == 0
    want = np.abs(node.v_seq.detach().numpy() - 0.7)
    assert np.array_equal(got.margins[ir_node.name][quiet], want[quiet])
    assert_busy(spikes)


def test_sj_refusals(sj):
    neuron, _, surrogate = sj
    with pytest.raises(UnsupportedOp, match="step_mode"):
        trace(dense(neuron.LIFNode(step_mode="s")), input_shape=(N_IN,))
    with pytest.raises(UnsupportedOp, match="surrogate"):
        trace(dense(neuron.IFNode(surrogate_function=surrogate.PoissonPass(), step_mode="m")), input_shape=(N_IN,))
    with pytest.raises(UnsupportedOp, match="subclasses"):
        trace(dense(neuron.LIAFNode(act=nn.ReLU(), threshold_related=False, step_mode="m")), input_shape=(N_IN,))
