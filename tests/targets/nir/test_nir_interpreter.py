"""spikec's own NIR interpreter, checked against hand-written recurrences of NIR's definitions."""
import numpy as np
import nir
import pytest

from spikec.ir.errors import BadInput
from spikec.formats.nir.interpreter import run

DT = 1e-4


def chain(*nodes, n=3):
    names = [f"n{i}" for i in range(len(nodes))]
    g = {"input": nir.Input(np.array([n])), **dict(zip(names, nodes)), "output": nir.Output(np.array([n]))}
    seq = ["input", *names, "output"]
    return nir.NIRGraph(nodes=g, edges=list(zip(seq, seq[1:])), metadata={})


def lif_ref(x, beta, theta, v_reset=0.0):
    """v <- beta v + x, spike v > theta, reset: the snnTorch form."""
    v, out = np.zeros_like(x[0]), []
    for xt in x:
        v = beta * v + xt
        s = v > theta
        v = np.where(s, v_reset, v)
        out.append(s.astype(float))
    return np.stack(out)


@pytest.fixture
def x():
    return np.random.default_rng(0).normal(0.3, 0.4, (20, 4, 3))


def test_lif_both_schemes(x):
    beta, n = np.array([0.9, 0.5, 0.0]), 3
    tau = DT / (1 - beta)
    g = chain(nir.LIF(tau=tau, r=np.ones(n), v_leak=np.zeros(n), v_threshold=(1 - beta) * 0.6,
                      v_reset=np.zeros(n)))
    expected = lif_ref(x, 1 - DT / tau, ((1 - beta) * 0.6) / (DT / tau))
    for scheme in ("snntorch", "norse"):
        np.testing.assert_array_equal(run(g, x, dt=DT, scheme=scheme).values["output"], expected)


def test_if_i_li_and_threshold(x):
    n = 3
    g = chain(nir.IF(r=np.full(n, 1 / DT), v_threshold=np.full(n, 0.8), v_reset=np.zeros(n)))
    np.testing.assert_array_equal(run(g, x, dt=DT, scheme="norse").values["output"], lif_ref(x, 1.0, 0.8))
    li = chain(nir.LI(tau=np.full(n, DT / 0.25), r=np.full(n, 2.0), v_leak=np.zeros(n)))
    v, expected = np.zeros_like(x[0]), []
    for xt in x:
        v = 0.75 * v + 0.25 * 2.0 * xt
        expected.append(v)
    np.testing.assert_allclose(run(li, x, dt=DT, scheme="norse").values["output"], np.stack(expected), rtol=1e-12)
    np.testing.assert_allclose(run(li, x, dt=DT, scheme="snntorch").values["output"], np.stack(expected), rtol=1e-12)
    integ = chain(nir.I(r=np.full(n, 3 / DT)))
    np.testing.assert_allclose(run(integ, x, dt=DT).values["output"], 3 * np.cumsum(x, 0), rtol=1e-12)
    th = chain(nir.Threshold(threshold=np.full(n, 0.3)))
    np.testing.assert_array_equal(run(th, x, dt=DT).values["output"], (x > 0.3).astype(float))


def test_cubalif_matches_snntorch_synaptic_form(x):
    n, a, b = 3, 0.6, 0.8
    node = nir.CubaLIF(tau_syn=np.full(n, DT / (1 - a)), tau_mem=np.full(n, DT / (1 - b)), r=np.full(n, 1 / (1 - b)),
                       v_leak=np.zeros(n), v_threshold=np.full(n, 0.9), w_in=np.full(n, 1 / (1 - a)))
    syn, mem, expected = np.zeros_like(x[0]), np.zeros_like(x[0]), []
    for xt in x:
        syn = a * syn + xt
        mem = b * mem + syn
        s = mem > 0.9
        mem = np.where(s, 0, mem)
        expected.append(s.astype(float))
    for scheme in ("snntorch", "norse"):
        got = run(chain(node), x, dt=DT, scheme=scheme).values["output"]
        assert (got == np.stack(expected)).mean() > 0.99  # rounding may flip a near-tie between schemes
    np.testing.assert_array_equal(run(chain(node), x, dt=DT, scheme="snntorch").values["output"], np.stack(expected))


def test_delay_and_feedback_read_one_step_late(x):
    n = 3
    g = chain(nir.Delay(delay=np.full(n, 3 * DT)))
    np.testing.assert_array_equal(run(g, x, dt=DT).values["output"], np.concatenate([np.zeros((3, 4, n)), x[:-3]]))
    with pytest.raises(BadInput, match="whole number"):
        run(g, x, dt=2 * DT)
    # y_t = x_t + 0.5 y_{t-1}: an Affine whose output feeds back into itself through a Scale
    nodes = {"input": nir.Input(np.array([n])), "acc": nir.Affine(weight=np.eye(n), bias=np.zeros(n)),
             "half": nir.Scale(scale=np.full(n, 0.5)), "output": nir.Output(np.array([n]))}
    edges = [("input", "acc"), ("acc", "half"), ("half", "acc"), ("acc", "output")]
    y, expected = np.zeros_like(x[0]), []
    for xt in x:
        y = xt + 0.5 * y
        expected.append(y)
    got = run(nir.NIRGraph(nodes=nodes, edges=edges, metadata={}), x, dt=DT).values["output"]
    np.testing.assert_allclose(got, np.stack(expected), rtol=1e-12)


def test_nested_graph_is_inlined(x):
    n = 3
    inner = chain(nir.Scale(scale=np.full(n, 2.0)))
    g = chain(inner, nir.Scale(scale=np.full(n, 3.0)))
    np.testing.assert_allclose(run(g, x, dt=DT).values["output"], 6 * x, rtol=1e-12)


def test_malformed_inputs(tmp_path, x):
    bad = tmp_path / "bad.nir"
    bad.write_text("not hdf5")
    with pytest.raises(BadInput, match="not a readable NIR file"):
        run(bad, x, dt=DT)
    with pytest.raises(BadInput, match="does not exist"):
        run(tmp_path / "missing.nir", x, dt=DT)
    with pytest.raises(BadInput, match="expects"):
        run(chain(nir.Scale(scale=np.ones(3))), x[..., :2], dt=DT)
    with pytest.raises(BadInput, match="scheme"):
        run(chain(nir.Scale(scale=np.ones(3))), x, dt=DT, scheme="euler")
    lonely = nir.NIRGraph(nodes={"input": nir.Input(np.array([3])), "s": nir.Scale(scale=np.ones(3)),
                                 "t": nir.Scale(scale=np.ones(3)), "output": nir.Output(np.array([3]))},
                          edges=[("input", "s"), ("s", "output"), ("t", "output")], metadata={}, type_check=False)
    with pytest.raises(BadInput, match="cannot be reached"):
        run(lonely, x, dt=DT)


def test_a_biased_feedback_carries_its_bias_at_the_first_step(x):
    """A cycle's edge at the first step carries its source's output at rest: the LIF's spikes are 0 there, so an
    Affine feedback gives its bias (as snnTorch's RSynaptic/RLeaky add rec(0) = bias), not 0."""
    n = 3
    w, b = np.array([[0.0, -0.5, 0.25], [0.5, 0.0, -0.25], [0.125, 0.375, 0.0]]), np.array([0.3, -0.2, 0.1])
    nodes = {"input": nir.Input(np.array([n])),
             "lif": nir.LIF(tau=np.full(n, 4 * DT), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.full(n, 0.05),
                            v_reset=np.zeros(n)),
             "rec": nir.Affine(weight=w, bias=b), "output": nir.Output(np.array([n]))}
    edges = [("input", "lif"), ("lif", "rec"), ("rec", "lif"), ("lif", "output")]
    got = run(nir.NIRGraph(nodes=nodes, edges=edges, metadata={}), x, dt=DT).values["output"]
    beta, gain = 1 - DT / (4 * DT), DT / (4 * DT)   # snnTorch scheme: v in input units, threshold v_th / (r dt/tau)
    v, s, expected = np.zeros_like(x[0]), np.zeros_like(x[0]), []
    for xt in x:
        v = beta * v + (xt + (s @ w.T + b))
        s = (v > 0.05 / gain).astype(float)
        v = np.where(s > 0, 0.0, v)
        expected.append(s)
    assert np.array_equal(got, np.stack(expected)) and 0 < got.sum() < got.size
    zero_first = (beta * 0 + x[0] > 0.05 / gain).astype(float)   # what reading the cycle as 0 at step 0 gives
    assert not np.array_equal(zero_first, got[0])   # the bias changes this input's first spikes
