"""SpikingJelly LIF/IF through the frontend (spikec.frontend.spikingjelly): bit-exact against SpikingJelly
in float64."""
import itertools

import numpy as np
import pytest
from torch import nn

from exact_neuron_helpers import HIDDEN, N_IN, assert_busy, compare, dense, inputs, neuron_spikes, steps_for
from spikec.ir.errors import UnsupportedOp
from spikec.frontend import trace


@pytest.fixture
def sj():
    neuron = pytest.importorskip("spikingjelly.activation_based.neuron",
                                 reason="SpikingJelly is an optional extra (pip install --no-deps spikingjelly loguru)")
    from spikingjelly.activation_based import functional, surrogate
    return neuron, functional, surrogate


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
    # V - V/2 is 0.5 V: tau=2 without input decay and with a zero or soft reset is the built-in lif op
    assert ir_node.op == ("lif" if tau == 2.0 and not decay_input and v_reset in (0.0, None) else "lif_sj")
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
