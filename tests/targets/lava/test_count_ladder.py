"""Count ladders (``spikec/targets/lava/count_ladder.py``): a bounded integer-firing neuron (Sinabs's MaxSpike(n), a
MultiSpike with a static bound) as D binary copies in Lava's standard LIF, run bit-exact in Lava against the
integer reference, its counts measured against the integer-firing neuron's, written and read back."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import spikec  # noqa: F401  (the package first, then its Sinabs frontend)
from spikec.frontend import sinabs as frontend  # before Sinabs: it lets Sinabs import without matplotlib
from spikec.ir.graph import Graph
from spikec.targets.lava import count_ladder, current_reset, lava_available
from spikec.targets.lava.ops import ladder_counts

sinabs = pytest.importorskip("sinabs")
import sinabs.layers as sl  # noqa: E402
from sinabs.activation import MaxSpike, MultiSpike  # noqa: E402

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def _conv_net(spike_fn=MultiSpike, n=None):
    """An N-MNIST-shaped Sinabs net as its tutorials write one: Conv -> IAFSqueeze -> AvgPool, twice, a Linear."""
    torch.manual_seed(0)
    fn = spike_fn if n is None else spike_fn(n)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=3, spike_fn=fn),
                      nn.AvgPool2d(2), nn.Conv2d(4, 4, 3, padding=1, bias=False),
                      sl.IAFSqueeze(batch_size=3, spike_fn=MaxSpike(3)), nn.Flatten(), nn.Linear(4 * 4 * 4, 5),
                      sl.IAFSqueeze(batch_size=3, spike_fn=MaxSpike(2)))
    with torch.no_grad():
        for layer in m:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                layer.weight.mul_(2.0).add_(0.15)
    return m


def _x(seed=0):
    return (np.random.default_rng(seed).random((8, 3, 2, 8, 8)) < 0.3).astype(np.float32)


def test_rung_offsets_are_what_lavas_bias_holds():
    """Every copy's offset decodes to ``-(q - 1) vth << 6`` (copy 1: +1, firing on >=) within Lava's 13-bit mantissa
    and 3-bit exponent; ``ladder_vth`` lowers vth only as far as the offsets and the 8-bit reset weight need."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        d, vth = int(rng.integers(2, 17)), int(rng.integers(1, 20000))
        v = count_ladder.ladder_vth(vth, d)
        assert 1 <= v <= vth and current_reset.representable_vth(v) == v
        mant, exp = count_ladder.offsets(v, d)
        assert mant.min() >= -4096 and mant.max() <= 4095 and exp.min() >= 0 and exp.max() <= 7
        assert list(mant << exp) == [1] + [-((q - 1) * v << 6) for q in range(2, d + 1)]
        bigger = [w for w in range(v + 1, min(vth, v + 40) + 1)
                  if current_reset.representable_vth(w) == w and count_ladder.offsets(w, d) is not None]
        assert not bigger   # no larger threshold would do
    assert count_ladder.ladder_vth(4000, 2) == 4000 and count_ladder.ladder_vth(4000, 9) < 1025


def test_counts_sum_each_neurons_copies():
    from spikec.ir.graph import Graph, Node, TensorType
    node = Node("x", "lava_lif", ("i",), TensorType((6, 2, 2), "binary"), {"ladder": 3, "reset": "zero"})
    g = Graph((Node("i", "input", (), TensorType((6, 2, 2), "binary")), node), ("x",))
    s = np.random.default_rng(0).integers(0, 2, (4, 2, 6, 2, 2))
    got = ladder_counts(g, {"x": s})["x"]
    assert got.shape == (4, 2, 2, 2, 2)
    np.testing.assert_array_equal(got, s[:, :, 0:2] + s[:, :, 2:4] + s[:, :, 4:6])


@needs_lava
def test_a_sinabs_multispike_net_runs_on_standard_lava_processes_bit_exact(tmp_path):
    m, x = _conv_net(), _x()
    c = spikec.compile(m, x, targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    ladders = t["count_ladders"]
    assert set(ladders["populations"]) == {"model.net.1", "model.net.4", "model.net.7"}   # the output layer too
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert all(kinds[n] == "LIF" for n in ladders["populations"])
    assert {"model.net.1.reset", "model.net.4.reset", "model.net.7.reset"} <= {p["name"] for p in t["processes"]}
    assert t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"], t["chip_readiness"]
    for name, p in ladders["per_population"].items():   # measured, not assumed: the counts mostly agree
        assert p["spikes_reference"] > 0 and p["count_agreement"] >= 0.95, (name, p)
    assert ladders["per_population"]["model.net.4"]["copies"] == 3
    # the output is the copies' spikes summed into counts, as Sinabs's output
    y = spikec.load(c.save(tmp_path / "out"))(x)
    assert y.shape == (8, 3, 5) and y.max() <= 2
    assert spikec.verify(tmp_path / "out")["target_lava"]["equivalent"] is True
    np.save(tmp_path / "x.npy", x)
    # the network as Lava processes, run by the user (in a process of its own): the same counts
    code = ("import numpy as np, spikec, spikec.targets.lava as L, sys\n"
            "out, x = sys.argv[1], np.load(sys.argv[2])\n"
            "got = L.network(out, batch=3).run(x.astype(np.int64))\n"
            "want = spikec.load(out)(x)\n"
            "print(all(np.array_equal(v, want) for v in got.values()), *[v.shape for v in got.values()])\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out"), str(tmp_path / "x.npy")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.split()[0] == "True", (r.stdout, r.stderr[-3000:])


@needs_lava
def test_with_lava_reset_subtract_the_integer_neurons_stay_spikec_intfire():
    c = spikec.compile(_conv_net(), _x(), targets=("lava",), lava_reset="subtract")
    t = c.targets["lava"]
    assert t["bit_exact"] is True and "count_ladders" not in t
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert kinds["model.net.1"] == kinds["model.net.4"] == "SpikecIntFire"


def test_a_bound_beyond_the_ladders_copies_is_refused_naming_it():
    """A deep MultiSpike layer's static bound is large: it stays SpikecIntFire, the reason on the chip-blocker line."""
    from spikec.targets.lava import deploy
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(40, 30, bias=False), sl.IAF(spike_fn=MultiSpike),
                      nn.Linear(30, 4, bias=False), sl.IAF(spike_fn=MultiSpike))
    with torch.no_grad():
        m[0].weight.abs_().mul_(3.0)
        m[2].weight.abs_().mul_(3.0)
    x = (np.random.default_rng(0).random((6, 2, 40)) < 0.5).astype(np.float32)
    c = spikec.compile(frontend.SinabsNet(m), x, targets=())
    q, net, _ = deploy(c.graph, x)
    kinds = {p["name"]: p for p in net["processes"]}
    deep = [p for p in net["processes"] if p["type"] == "SpikecIntFire"]
    assert deep and all("beyond the ladder's 16" in p["count_ladder_refused"] for p in deep)
    assert any(p["type"] == "LIF" and p.get("ladder") for p in kinds.values())
    assert q.variant["ladders_refused"]


def test_a_membrane_read_keeps_the_integer_neuron():
    from spikec.ir.graph import Graph, Node, TensorType
    p = {"du": np.int64(4095), "dv": np.int64(0), "vth": np.int64(100), "bias_mant": np.int64(0),
         "bias_exp": np.int64(0)}
    w = np.ones((3, 4), dtype=np.int64)
    nodes = (Node("i", "input", (), TensorType((4,), "binary")),
             Node("syn", "lava_dense", ("i",), TensorType((3,)), {"weight_exp": 0, "num_message_bits": 0},
                  {"weight": w}),
             Node("n", "lava_intfire", ("syn",), TensorType((3,), "integer", 3),
                  {"max_spikes": 3, "rounding": "floor", "unrolled": False, "output": "spikes"}, p))
    g = Graph(nodes, ("n",))
    assert count_ladder.refusal(g, g.node("n")) is None
    read = nodes[2].with_(name="n.membrane", attrs={**nodes[2].attrs, "output": "membrane"})
    g2 = Graph(nodes + (read,), ("n", "n.membrane"))
    assert "membrane is read" in count_ladder.refusal(g2, g2.node("n"))
    rounded = nodes[2].with_(attrs={**nodes[2].attrs, "rounding": "round"})
    g3 = Graph(nodes[:2] + (rounded,), ("n",))
    assert "rounds to nearest" in count_ladder.refusal(g3, g3.node("n"))
    out, changed, refused = count_ladder.apply(g3)
    assert changed == [] and out.node("n").op == "lava_intfire" and "count_ladder_refused" in out.node("n").attrs



def _integer_net(rng, d, n_in=6, n=4, vth=20):
    from spikec.ir.graph import Graph, Node, TensorType
    w = rng.integers(-60, 90, (n, n_in)).astype(np.int64)
    p = {"du": np.int64(4095), "dv": np.int64(0), "vth": np.int64(vth), "bias_mant": np.zeros(n, dtype=np.int64),
         "bias_exp": np.zeros(n, dtype=np.int64)}
    nodes = (Node("i", "input", (), TensorType((n_in,), "binary")),
             Node("syn", "lava_dense", ("i",), TensorType((n,)), {"weight_exp": 0, "num_message_bits": 0},
                  {"weight": w}),
             Node("n", "lava_intfire", ("syn",), TensorType((n,), "integer", d),
                  {"max_spikes": d, "rounding": "floor", "unrolled": False, "output": "spikes"}, p))
    return Graph(nodes, ("n",))


def _documented_ladder(node, a):
    """The module doc's equations, written out: one shared u, a v per copy, the rung offsets, the reset of w S."""
    d, vth = int(node.attrs["ladder"]), int(node.params["vth"])
    b = (np.asarray(node.params["bias_mant"]) << np.asarray(node.params["bias_exp"])).reshape(d, -1)
    w = -int(node.params["reset_weight"]) << int(node.attrs["reset_weight_exp"])
    keep = 4095 - int(node.params["du"])
    u = np.zeros(a.shape[1:], dtype=np.int64)
    v = np.zeros((d,) + a.shape[1:], dtype=np.int64)
    s_prev, out = np.zeros_like(u), []
    for t in range(a.shape[0]):
        u = np.sign(u) * ((np.abs(u) * keep) >> 12) + ((a[t] - w * s_prev) << 6)
        v = np.sign(v) * (np.abs(v) >> 12) + u[None] + b[:, None, :]
        fired = v > (vth << 6)
        v[fired] = 0
        s_prev = fired.sum(0)
        out.append(s_prev)
    return np.array(out)


def test_the_ladders_integer_op_is_its_documented_arithmetic():
    """Property: on random weights and spikes, the rewritten graph's counts (the interpreter's lava_lif with the ladder
    reset) are the module doc's equations, and they mostly agree with the integer-firing neuron they replace."""
    from spikec.core.interpreter import run
    from spikec.targets.lava.ops import dense_effective_weights
    rng = np.random.default_rng(3)
    agree = []
    for trial in range(20):
        d = int(rng.integers(2, 7))
        g = _integer_net(rng, d, vth=int(rng.integers(8, 40)))
        vth = count_ladder.ladder_vth(int(g.node("n").params["vth"]), d)
        g = Graph(tuple(m.with_(params={**m.params, "vth": np.int64(vth)}) if m.name == "n" else m for m in g.nodes),
                  g.outputs)
        ladder, changed, _ = count_ladder.apply(g)
        assert changed == ["n"]
        x = (rng.random((12, 2, 6)) < 0.5).astype(np.int64)
        got = ladder_counts(ladder, run(ladder, {"i": x}, integer=True).values)["n"]
        w = dense_effective_weights(np.asarray(g.node("syn").params["weight"]))   # as Lava's Dense applies them
        a = np.einsum("tbi,ni->tbn", x, w)
        np.testing.assert_array_equal(got, _documented_ladder(ladder.node("n"), a))
        agree.append(float((got == run(g, {"i": x}, integer=True).values["n"]).mean()))
    assert np.mean(agree) > 0.9, agree   # the ladder's carry and ties are rare, not the rule


@needs_lava
def test_an_outdir_written_before_ladders_still_verifies(tmp_path, monkeypatch):
    """An OUTDIR an older spikec wrote (its integer neurons SpikecIntFire, its binary ones Lava's LIF with the membrane
    in u: what no option gives now) is re-derived as that older default and verifies."""
    from sinabs.activation import SingleSpike
    m, x = _conv_net(SingleSpike), _x()   # a binary first layer (the membrane in u) before the integer ones
    monkeypatch.setattr(count_ladder, "candidates", lambda g: {})   # the deployment before ladders existed
    monkeypatch.setattr(count_ladder, "apply", lambda g: (g, [], {}))
    c = spikec.compile(m, x, targets=("lava",))
    assert "count_ladders" not in c.targets["lava"] and c.targets["lava"]["bit_exact"] is True
    out = c.save(tmp_path / "old")
    monkeypatch.undo()
    r = spikec.verify(out)["target_lava"]
    assert r["equivalent"] is True and "no count ladders" in r["quantized_rederived"]["as"], r["quantized_rederived"]
