"""SpikingJelly's commonest neurons reach NIR, checked against SpikingJelly's own modules and the real importers.

``IFNode`` is spikec's ``lif`` (an ``IF``; for snnTorch a ``LIF`` with ``tau = dt 2**60`` and ``r = 2**60``, which
its importer builds as ``Leaky(beta=1.0)``). ``LIFNode`` / ``ParametricLIFNode`` with ``decay_input=True`` and
``v_reset=0`` (the defaults but PLIF's) is ``lif_sj``, written as a NIR ``LIF`` in the norse scheme, whose Euler
step ``v + dt/tau (I - v)`` is SpikingJelly's charge ``V + (X - V)/tau`` bit for bit when ``tau`` is a power of two
(SpikingJelly's default 2) or the decay is PLIF's. What cannot be written so is refused naming why.
"""
import numpy as np
import pytest
import torch
from spikingjelly.activation_based import functional, layer, neuron
from torch import nn

import spikec


def csnn(*neurons):
    torch.manual_seed(0)
    net = nn.Sequential(layer.Conv2d(1, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8), neurons[0],
                        layer.MaxPool2d(2), layer.Flatten(), layer.Linear(8 * 6 * 6, 10), neurons[1])
    functional.set_step_mode(net, "m")
    return net.eval()


def inputs(seed=0):
    return (np.random.default_rng(seed).random((12, 3, 1, 12, 12)) < 0.35).astype(np.float64)


def compile_nir(net, consumer):
    return spikec.compile(net, inputs(), targets="nir", nir_consumer=consumer, stepping="multistep", probes=False)


@pytest.mark.parametrize("neurons", [
    lambda: (neuron.IFNode(), neuron.LIFNode()),                                  # the defaults: tau = 2
    lambda: (neuron.LIFNode(tau=4.0, v_threshold=0.5), neuron.ParametricLIFNode(v_reset=0.0)),  # tau 4, PLIF
], ids=["IF+LIF", "LIF4+PLIF"])
def test_lif_nodes_export_exactly_and_norse_runs_them_spike_for_spike(neurons):
    c = compile_nir(csnn(*neurons()), "any")
    target = c.report["target"]
    assert c.report["equivalent"] and target["exact"] and target["scheme"] == "norse", target
    assert any(n.op == "lif_sj" for n in c.graph.nodes)
    norse = target["consumers"]["norse"]
    assert norse["ran"] and norse["spike_exact"] and norse["spike_count"] > 0, norse


def test_a_soft_reset_lif_node_exports_and_norse_runs_it_spike_for_spike():
    c = compile_nir(csnn(neuron.IFNode(), neuron.LIFNode(v_reset=None)), "norse")
    target = c.report["target"]
    assert c.report["equivalent"] and target["exact"], target
    norse = target["consumers"]["norse"]
    assert norse["ran"] and norse["spike_exact"] and norse["spike_count"] > 0, norse


def test_an_if_network_for_snntorch_is_leaky_beta_one(tmp_path):
    c = compile_nir(csnn(neuron.IFNode(), neuron.IFNode()), "snntorch")
    target = c.report["target"]
    assert target["exact"] and target["scheme"] == "snntorch"
    snn = target["consumers"]["snntorch"]
    assert snn["ran"] and snn["spike_exact"] and snn["spike_count"] > 0, snn
    import nir
    lifs = [v for v in nir.read(c.save(tmp_path / "out") / "model.nir").nodes.values() if isinstance(v, nir.LIF)]
    integrators = [lif for lif in lifs if float(1 - 1e-4 / lif.tau.flat[0]) == 1.0]   # the max pool is a third LIF
    assert len(lifs) == 3 and len(integrators) == 2


@pytest.mark.parametrize("make, consumer, why", [
    (lambda: neuron.LIFNode(tau=3.0), "any", "tau = 3.0 is not a power of two"),
    (lambda: neuron.LIFNode(v_reset=0.5), "norse", "v_reset = 0.5"),
    (lambda: neuron.ParametricLIFNode(decay_input=False, v_reset=0.0), "any", "decay_input=False"),
    (lambda: neuron.LIFNode(), "snntorch", "written for the snnTorch consumer"),
])
def test_what_nir_cannot_hold_is_refused_naming_why(make, consumer, why):
    c = compile_nir(csnn(neuron.IFNode(), make()), consumer)
    nir_target = c.targets["nir"]
    assert nir_target["refused"] and not c.equivalent
    assert nir_target["reason"].startswith("node '6' (lif_sj") and f"exactly: {why}" in nir_target["reason"]
    assert "--nir-consumer any or norse" in nir_target["reason"]   # the remedy
