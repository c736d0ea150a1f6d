"""Rockpool 3.1.0's ``from_nir`` as a NIR consumer (``rockpool_consumer``): each limit its source shows, pinned on
a real run against spikec's NIR interpreter, so that a fixed Rockpool makes its test fail and shows up."""
import nir
import numpy as np
import pytest

from spikec.targets.nir import consumers, rockpool_consumer
from spikec.formats.nir import interpreter

if rockpool_consumer.available() is not None:
    pytest.skip(rockpool_consumer.available(), allow_module_level=True)

N, DT = 4, 1e-4
W = np.random.default_rng(0).random((N, 3)) * 2


def graph(neuron, extra=None):
    nodes = {"input": nir.Input(np.array([3])), "fc": nir.Affine(weight=W, bias=np.zeros(N)), "n": neuron,
             "output": nir.Output(np.array([N])), **(extra or {})}
    loop = [("n", "rec"), ("rec", "n")] if extra else []
    return nir.NIRGraph(nodes=nodes, edges=[("input", "fc"), ("fc", "n"), ("n", "output"), *loop])


def inputs():
    return np.random.default_rng(1).random((40, 2, 3))


def both(g, tmp_path):
    path = tmp_path / "g.nir"
    nir.write(path, g)
    x = inputs()
    want = interpreter.run(path, x, dt=DT, scheme="snntorch").values["output"]
    got, spikes = consumers.run_consumer("rockpool", path, x, DT, (N,))
    return want, got, spikes


def cuba():   # snnTorch's form: r = tau_mem/dt, w_in = tau_syn/dt (gains 1)
    f = lambda v: np.full(N, v)
    return nir.CubaLIF(tau_syn=f(5e-4), tau_mem=f(1e-3), r=f(10.0), v_leak=f(0.0), v_threshold=f(1.0),
                       v_reset=f(0.0), w_in=f(5.0))


def test_rockpool_is_a_consumer_whose_limits_are_named():
    assert "rockpool" in consumers.CONSUMERS and consumers.available("rockpool") is None
    found = consumers.limits(graph(cuba()), DT)["rockpool"]
    assert any("LIFTorch" in w and "floor(v/v_threshold)" in w for w in found), found


def test_a_cuba_lif_runs_in_its_own_time_base_and_fires_differently(tmp_path):
    want, got, spikes = both(graph(cuba()), tmp_path)
    assert want.any() and got.any()
    assert set(spikes) == {"n"}
    assert (want != got).sum() > 0.05 * want.size   # pinned: exp decays at dt = tau_mem/(1 + r), a subtract reset


def test_a_lif_import_raises_as_its_source_reads_tau_mem(tmp_path):
    f = lambda v: np.full(N, v)
    g = graph(nir.LIF(tau=f(1e-3), r=f(10.0), v_leak=f(0.0), v_threshold=f(1.0), v_reset=f(0.0)))
    assert any("tau_mem" in w for w in consumers.limits(g, 1e-4)["rockpool"])
    with consumers._quiet(), pytest.raises(AttributeError, match="tau_mem"):
        both(g, tmp_path)


def test_an_li_below_one_second_has_its_tau_truncated_to_zero(tmp_path):
    f = lambda v: np.full(N, v)
    g = graph(nir.LI(tau=f(1e-3), r=f(10.0), v_leak=f(0.0)))
    assert any("truncates tau" in w for w in consumers.limits(g, 1e-4)["rockpool"])
    want, got, _ = both(g, tmp_path)
    assert np.abs(want).max() > 0 and not np.allclose(got, want, rtol=1e-3)   # pinned: tau.int() = 0


def test_a_cycle_carries_nothing_in_one_call(tmp_path):
    g = graph(cuba(), extra={"rec": nir.Linear(weight=-np.eye(N))})
    found = consumers.limits(g, 1e-4)["rockpool"]
    assert any("a cycle through" in w for w in found) and any("Output is not the last" in w for w in found)
    want, got, _ = both(g, tmp_path)
    _, plain, _ = both(graph(cuba()), tmp_path)
    # pinned: it returns the last node visited (the feedback Linear: -spikes), and the feedback changed no spike
    np.testing.assert_array_equal(got, -plain)
    assert (want != interpreter.run(graph(cuba()), inputs(), dt=DT).values["output"]).any()   # the file's does
