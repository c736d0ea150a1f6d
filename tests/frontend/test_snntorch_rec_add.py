"""``synaptic_snntorch``'s ``rec_add``: where the recurrence joins the synaptic current.

``"after"`` (snnTorch's RSynaptic): ``syn = (alpha syn + x) + rec(spk)``; ``"input"`` (a NIR CubaLIF cycle, which
NIR sums at the node's input): ``syn = alpha syn + (x + rec(spk))``. Both are checked against a float64 loop
written from those formulas, and shown to differ where float addition does not associate.
"""
import numpy as np
import pytest

from spikec.ir.errors import IRError
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify
import spikec.frontend.snntorch_neurons  # noqa: F401  (defines the snnTorch ops)

N = 4


def graph(rec_add, weight, bias, alpha=0.5, beta=0.75, theta=1.0):
    x = Node("x", "input", (), TensorType((N,), "real"))
    attrs = {"reset": "zero", "reset_delay": False, "recurrent": "linear"}
    if rec_add is not None:
        attrs["rec_add"] = rec_add
    p = {"alpha": np.full(N, alpha), "beta": np.full(N, beta), "threshold": np.full(N, theta), "weight": weight,
         "bias": bias}
    spikes = Node("s", "synaptic_snntorch", ("x",), TensorType((N,), "binary"), attrs, p)
    syn = Node("syn", "synaptic_snntorch", ("x",), TensorType((N,)), {**attrs, "read": "syn"}, p)
    return verify(Graph((x, spikes, syn), ("s", "syn"), {}), "test")


def reference(x, weight, bias, rec_add, alpha=0.5, beta=0.75, theta=1.0):
    """The formulas, in numpy float64: zero reset on the spiking step (reset_delay=False, theta >= 0)."""
    syn, mem, spk = np.zeros(x.shape[1:]), np.zeros(x.shape[1:]), np.zeros(x.shape[1:])
    spikes, syns = [], []
    for x_t in x:
        rec = spk @ weight.T + bias
        syn = alpha * syn + (x_t + rec) if rec_add == "input" else (alpha * syn + x_t) + rec
        mem = beta * mem + syn
        spk = (mem - theta > 0).astype(np.float64)
        mem = mem - spk * mem
        spikes.append(spk)
        syns.append(syn)
    return np.stack(spikes), np.stack(syns)


@pytest.mark.parametrize("rec_add", ["after", "input"])
def test_kernel_is_the_formula_on_random_inputs(rec_add):
    rng = np.random.default_rng(3)
    w, b = rng.normal(size=(N, N)) / 3, rng.normal(size=N) / 10
    x = rng.normal(size=(40, 3, N)) * 0.8
    t = run(graph(rec_add, w, b), {"x": x})
    s, syn = reference(x, w, b, rec_add)
    assert np.array_equal(t.values["s"], s) and np.array_equal(t.values["syn"], syn)
    assert 0 < s.sum() < s.size   # it fires, and not always


def test_the_order_matters_where_addition_does_not_associate():
    """x = 1e16 and a recurrence bias of -1e16: (alpha syn + x) + rec loses alpha syn = 1, x + rec does not."""
    w, b = np.zeros((N, N)), np.full(N, -1e16)
    x = np.array([[[1e16 + 2.0] * N], [[1e16] * N]]).reshape(2, 1, N)   # step 0: syn = 2 in either order (exact)
    after = run(graph("after", w, b, theta=1e9), {"x": x}).values["syn"]
    first = run(graph("input", w, b, theta=1e9), {"x": x}).values["syn"]
    default = run(graph(None, w, b, theta=1e9), {"x": x}).values["syn"]
    assert np.array_equal(after, default)   # absent means snnTorch's order
    assert after[1, 0, 0] == 0.0 and first[1, 0, 0] == 1.0


def test_an_unknown_rec_add_is_refused_naming_the_node():
    with pytest.raises(IRError) as e:
        graph("before", np.eye(N), np.zeros(N))
    assert "rec_add" in str(e.value) and "'s'" in str(e.value)
