"""snnTorch Leaky through the frontend (spikec.frontend.snntorch): bit-exact against snnTorch in float64."""
import itertools

import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snc
from exact_neuron_helpers import HIDDEN, N_IN, assert_busy, compare, dense, inputs, neuron_spikes, steps_for
from spikec.ir.errors import UnsupportedOp
from spikec.frontend import trace
from spikec.frontend.snntorch import SnnTorchMultiStep


@pytest.fixture
def snntorch():
    return pytest.importorskip("snntorch", reason="snnTorch is an optional extra")


BETAS = {"scalar": lambda: 0.8, "per_neuron": lambda: torch.linspace(-0.2, 1.3, HIDDEN),  # clamped to [0, 1]
         "learnable": lambda: torch.full((HIDDEN,), 0.9)}
RESETS = ("subtract", "zero", "none")


@pytest.mark.parametrize("reset,beta,delay", list(itertools.product(RESETS, BETAS, (True, False))))
def test_leaky_is_exact(snntorch, reset, beta, delay):
    leaky = snntorch.Leaky(beta=BETAS[beta](), threshold=0.7, reset_mechanism=reset, reset_delay=delay,
                           learn_beta=beta == "learnable")
    steps = steps_for(reset, beta, delay)
    graph, got = compare(dense(SnnTorchMultiStep(leaky)), inputs(1, steps))
    node, spikes = neuron_spikes(graph, got)
    # zero reset is the lif op with reset_delay, and without it for a threshold >= 0 (here 0.7)
    assert node.op == ("lif" if reset == "zero" else "lif_snntorch")
    if steps > 1:
        assert_busy(spikes)


@pytest.mark.parametrize("reset,beta", list(itertools.product(RESETS, BETAS)))
def test_leaky_membrane_is_bit_exact(snntorch, reset, beta):
    """The IR's firing margins |U - threshold| equal snnTorch's own membrane, step by step."""
    threshold = torch.tensor(0.3, dtype=torch.float64)  # not a float32: snnTorch's reset rounds it
    leaky = snntorch.Leaky(beta=BETAS[beta](), threshold=threshold, reset_mechanism=reset,
                           learn_beta=beta == "learnable")
    x = inputs(10, 16, shape=(HIDDEN,))
    graph, got = compare(nn.Sequential(SnnTorchMultiStep(leaky)), x, shape=(HIDDEN,))
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
    graph, got = compare(dense(SnnTorchMultiStep(leaky)), inputs(2, 16))
    _, spikes = neuron_spikes(graph, got)
    assert_busy(spikes)
    assert (spikes.sum(0) >= 2).any()  # neurons that fire again after a reset


@pytest.mark.parametrize("reset", RESETS)
def test_leaky_strict_threshold_on_ties(snntorch, reset):
    """Dyadic inputs hit U == threshold exactly; snnTorch fires only on U > threshold."""
    leaky = snntorch.Leaky(beta=0.5, threshold=1.0, reset_mechanism=reset)
    x = np.random.default_rng(3).integers(0, 5, size=(16, 4, 8)) / 4.0
    graph, got = compare(nn.Sequential(SnnTorchMultiStep(leaky)), x, shape=(8,))
    node, spikes = neuron_spikes(graph, got)
    assert (got.margins[node.name] <= 1e-15).sum() > 0  # ties (lif measures at nextafter(1.0))
    assert_busy(spikes)


def test_leaky_learnable_threshold_graded_and_hidden_state(snntorch):
    leaky = snntorch.Leaky(beta=0.9, threshold=torch.linspace(0.3, 1.5, HIDDEN), learn_threshold=True,
                           graded_spikes_factor=0.37, init_hidden=True, output=True)
    graph, got = compare(dense(SnnTorchMultiStep(leaky)), inputs(4, 12))
    assert [n.op for n in graph.nodes].count("scale") == 1
    _, spikes = neuron_spikes(graph, got)
    assert_busy(spikes)


def test_leaky_per_channel_after_conv(snntorch):
    torch.manual_seed(1)
    beta = torch.tensor([0.5, 0.9, 1.0]).view(3, 1, 1)
    model = nn.Sequential(snc.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1)),
                          SnnTorchMultiStep(snntorch.Leaky(beta=beta, threshold=0.5)))
    graph, got = compare(model, inputs(6, 7, shape=(2, 5, 5)), shape=(2, 5, 5))
    assert_busy(neuron_spikes(graph, got)[1])


def test_leaky_refusals(snntorch):
    torch.manual_seed(0)
    with pytest.raises(UnsupportedOp, match="not snntorch.Leaky"):
        trace(dense(SnnTorchMultiStep(snntorch.DeltaLeaky(beta=0.9))), input_shape=(N_IN,))
    with pytest.raises(UnsupportedOp, match="inhibition"):
        trace(dense(SnnTorchMultiStep(snntorch.Leaky(beta=0.9, inhibition=True))), input_shape=(N_IN,))
    per_neuron = snntorch.Leaky(beta=torch.rand(3, 5, 5))
    model = nn.Sequential(snc.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1)), SnnTorchMultiStep(per_neuron))
    with pytest.raises(UnsupportedOp, match="per-channel"):
        trace(model, input_shape=(2, 5, 5))
    inside = snc.TimeDistributed(nn.Linear(N_IN, HIDDEN), SnnTorchMultiStep(snntorch.Leaky(beta=0.9)))
    with pytest.raises(UnsupportedOp, match="TimeDistributed"):
        trace(inside, input_shape=(N_IN,))
