"""A read-out as Lava's standard LIF (``standard_readout.py``): ``u = a << 6`` read by Lava's Monitor, the bias
added by the host. Exact at both ends of its range in Lava's simulation; one unit beyond, Lava's 24-bit current
wraps (forced, the comparison fails), so the lowering keeps spikec's Readout there and says why; a sub-step
schedule, a host value into the port and a process reading the value keep it too."""
import numpy as np
import pytest

from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import chip, lava_available, standard_readout
from spikec.targets.lava.lower import lower

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def _graph(weights: np.ndarray, bias, kind="binary") -> Graph:
    """input [N] -> Dense (its excitatory part) + Dense (its inhibitory part) -> read-out [M] (an integer graph, as
    the quantizer emits it; single-sign weights keep every bit in Lava's Dense)."""
    n_out, n_in = weights.shape
    t = TensorType((n_in,), "integer", 3) if kind == "integer" else TensorType((n_in,), "binary")
    nmb = 2 if kind == "integer" else 0
    w = np.asarray(weights, dtype=np.int64)
    dense = lambda name, part: Node(name, "lava_dense", ("x",), TensorType((n_out,)),
                                    {"weight_exp": 0, "num_message_bits": nmb}, {"weight": part})
    return Graph((Node("x", "input", (), t), dense("dp", np.maximum(w, 0)), dense("dn", np.minimum(w, 0)),
                  Node("d", "add", ("dp", "dn"), TensorType((n_out,))),
                  Node("r", "lava_readout", ("d",), TensorType((n_out,)), {}, {"bias": np.asarray(bias, np.int64)})),
                 ("r",))


TERMS = [("syn", "dp"), ("syn", "dn")]


def _edge(extra: int = 0) -> np.ndarray:
    """Row 0 sums to 131072 + extra over all-ones inputs (the top of the exact range); row 1 to -131071."""
    w = np.zeros((2, 515), dtype=np.int64)
    w[0, :514], w[0, 514] = 255, 2 + extra
    w[1, :514], w[1, 514] = -255, -1
    return w


def _process(q: Graph) -> dict:
    net, _ = lower(q)
    return next(p for p in net["processes"] if p["name"] == "r")


def test_host_values_shift_u_and_add_the_bias_from_the_start():
    u = np.array([[0, 0], [64, -128], [64 * 131072, -64 * 131071]], dtype=np.float64)   # Monitor: (steps, N)
    y = standard_readout.host_values(u, np.array([5, -7]), start=1)
    assert y.tolist() == [[0, 6, 131077], [0, -9, -131078]]   # (N, steps); no bias before the first update


def test_the_bound_is_the_extreme_sum_over_any_input():
    assert standard_readout.bound(_graph(_edge(), [0, 0]), None, TERMS) == (-131071, 131072)
    q = _graph(np.array([[3, -2, 1]]), [0], kind="integer")   # integer payloads 0..3: 3 x the signed parts
    assert standard_readout.bound(q, None, TERMS) == (-6, 12)
    p = _process(_graph(_edge(), [1, 2]))
    assert p["type"] == "LIFReadout" and p["a_bound"] == [-131071, 131072] and p["a_exact"] == [-131071, 131072]
    assert (p["du"], p["dv"], p["vth"], p["state"]) == (4095, 4095, 2 ** 17 - 1, "u")
    assert chip.verdict(p)["chip_ready"] and "Monitor" in chip.verdict(p)["why"]


def test_beyond_the_exact_range_it_stays_a_readout_and_says_why():
    p = _process(_graph(_edge(extra=1), [0, 0]))
    assert p["type"] == "Readout" and "131073" in p["standard_readout_refused"]
    (b,) = chip.blockers({"processes": [p]})
    assert "not Lava's LIF because its synaptic sum may reach [-131071, 131073]" in b["why"]


def test_a_reader_or_a_host_value_keeps_the_readout():
    q = _graph(np.ones((2, 3), np.int64), [0, 0])
    reader = Node("rd", "lava_dense", ("r",), TensorType((2,)), {"weight_exp": 0, "num_message_bits": 8},
                  {"weight": np.eye(2, dtype=np.int64)})
    q2 = Graph(q.nodes + (reader,), ("r",))
    assert "'rd' reads its value" in standard_readout.refusal(q2, q2.node("r"), {"period": 1}, TERMS)
    assert "sub-step schedule" in standard_readout.refusal(q, q.node("r"), {"period": 3}, TERMS)
    assert standard_readout.refusal(q, q.node("r"), {"period": 1}, TERMS) is None
    assert "sent straight" in standard_readout.refusal(q, q.node("r"), {"period": 1}, [("direct", "h")])


def _lava_vs_reference(q: Graph, x: np.ndarray, force: bool = False, monkeypatch=None) -> dict:
    from spikec.core.interpreter import run
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.simulate import run_lava
    if force:   # pretend the range were wider: the LIF is then used where u wraps
        monkeypatch.setattr(standard_readout, "EXACT", (-(2 ** 20), 2 ** 20))
    net, arrays = lower(q)
    trace = run(q, {"x": x}, integer=True)
    r = compare(net, trace, run_lava(net, arrays, {"x": x}), x.shape[0])
    return {"type": next(p["type"] for p in net["processes"] if p["name"] == "r"), **r}


@needs_lava
def test_lavas_lif_is_exact_at_both_ends_of_the_range_and_wraps_beyond(monkeypatch):
    rng = np.random.default_rng(3)
    x = (rng.random((6, 3, 515)) < 0.5).astype(np.int64)
    x[2:4] = 1   # every input: the sums reach 131072 and -131071
    r = _lava_vs_reference(_graph(_edge(), [7, -9]), x)
    assert r["type"] == "LIFReadout" and r["bit_exact"], r["first_mismatches"]
    assert r["values_compared"] == 6 * 3 * 2 and r["pre_latency_values_checked"] > 0
    kept = _lava_vs_reference(_graph(_edge(extra=1), [7, -9]), x)   # one beyond: spikec's Readout, exact
    assert kept["type"] == "Readout" and kept["bit_exact"]
    forced = _lava_vs_reference(_graph(_edge(extra=1), [7, -9]), x, force=True, monkeypatch=monkeypatch)
    assert forced["type"] == "LIFReadout" and not forced["bit_exact"]   # u wrapped: the refusal is needed
    assert forced["mismatch_counts"] == {"r": {"output": 2 * 3}}        # the two all-ones steps, row 0, 3 samples
