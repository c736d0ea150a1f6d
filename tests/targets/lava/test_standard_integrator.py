"""A leaky-integrator read-out (``lava_lif`` firing never: Norse's LI) as Lava's standard LIF
(``standard_integrator.py``): vth out of reach, ``v`` read by Lava's Monitor. Exact at the top of its static bound in
Lava's simulation; one step of the bound beyond, it stays SpikecLIF and says why, and forced onto Lava's LIF there it
fires and resets (the comparison fails). Also: the bound against the recursion itself, the refusals, and a Norse LIBox
read-out compiled end to end (chip-ready, bit-exact), and an LICell behind a biased Linear too, its current bias
through a Dense (current_bias.py)."""
import numpy as np
import pytest

from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import chip, lava_available, standard_integrator
from spikec.targets.lava import ops as lops
from spikec.targets.lava.lower import lower

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def _node(du=4095, dv=2048, bias=(0, 0), n=2, inputs=("d",)) -> Node:
    attrs = {"reset": "none", **lops.output_attrs({}, "v"), "process": "SpikecLIF", "fire": "never", "primary": True}
    return Node("r", "lava_lif", inputs, TensorType((n,), "real"), attrs,
                {"du": np.int64(du), "dv": np.int64(dv), "vth": np.int64(0),
                 "bias_mant": np.asarray(bias, np.int64), "bias_exp": np.zeros(n, np.int64)})


def _edge(extra: int = 0) -> np.ndarray:
    """Row 0 sums to 65535 + extra over all-ones inputs (v's bound 128 a reaches the top, 2^23 - 64, at 65535.5 with
    dv = 2048); row 1 to -65535."""
    w = np.zeros((2, 258), dtype=np.int64)
    w[0, :257], w[0, 257] = 255, extra
    w[1, :257] = -255
    return w


def _graph(weights: np.ndarray, **kw) -> Graph:
    n_out, n_in = weights.shape
    dense = lambda name, part: Node(name, "lava_dense", ("x",), TensorType((n_out,)),
                                    {"weight_exp": 0, "num_message_bits": 0}, {"weight": part})
    return Graph((Node("x", "input", (), TensorType((n_in,), "binary")), dense("dp", np.maximum(weights, 0)),
                  dense("dn", np.minimum(weights, 0)), Node("d", "add", ("dp", "dn"), TensorType((n_out,))),
                  _node(n=n_out, **kw)), ("r",))


def _process(q: Graph) -> dict:
    net, _ = lower(q)
    return next(p for p in net["processes"] if p["name"] == "r")


def _reference_peak(a: int, du: int, dv: int, bias: int) -> int:
    """The largest v of the integer recursion (``ops.decay``, the reference's own) under a constant synaptic sum
    ``a`` (the worst input), run until it stops changing."""
    from spikec.targets.lava.ops import decay
    fu, fv = np.array(4096 - (du + 1)), np.array(4096 - dv)
    u = v = np.array(0)
    peak, last = 0, None
    while (int(u), int(v)) != last:
        last = (int(u), int(v))
        u = decay(u, fu) + (a << 6)
        v = decay(v, fv) + u + bias
        peak = max(peak, int(v))
    return peak


@pytest.mark.parametrize("du, dv, a, bias", [(4095, 2048, 65535, 0), (4095, 410, 300, 7), (3686, 410, 20, -3),
                                             (2000, 1, 1, 0), (4095, 4000, 1, 100)])
def test_the_bound_holds_the_recursion_and_is_tight(du, dv, a, bias):
    lo, hi = standard_integrator.v_bound(_node(du, dv, bias=(bias, bias)), (-a, a))
    peak = _reference_peak(a, du, dv, bias)
    assert hi == peak   # a bound, reached by the worst input
    assert lo == -standard_integrator.v_bound(_node(du, dv, bias=(-bias, -bias)), (-a, a))[1]


def test_below_the_top_it_is_lavas_lif_and_says_what_holds():
    p = _process(_graph(_edge()))
    assert (p["type"], p["du"], p["dv"], p["vth"], p["state"]) == ("LIF", 4095, 2048, 2 ** 17 - 1, "v")
    assert p["a_bound"] == [-65535, 65535] and p["v_bound"] == [-(128 * 65535 - 1), 128 * 65535 - 1]   # v = 64 a + floor(v / 2)
    v = chip.verdict(p)
    assert v["chip_ready"] and "never reached" in v["why"] and "Monitor" in v["why"]
    net, arrays = lower(_graph(_edge()))
    assert not {"r/du", "r/dv", "r/vth"} & set(arrays)   # Lava's LIF takes them as the record's scalars
    (rec,) = net["recorded"]
    assert (rec["port"], rec["via"]) == ("v", "monitor")


def test_beyond_the_top_or_without_a_bound_it_stays_spikec_lif_and_says_why():
    p = _process(_graph(_edge(extra=2)))
    assert p["type"] == "SpikecLIF" and "8388735" in p["standard_integrator_refused"]
    (b,) = chip.blockers({"processes": [p]})
    assert "not Lava's LIF because its state v may reach 8388735" in b["why"] and "vth out of reach" in b["remedy"]
    assert "no leak" in _process(_graph(_edge(), dv=0))["standard_integrator_refused"]
    q = _graph(_edge())
    assert "sub-step" in standard_integrator.refusal(q, q.node("r"), {"period": 2}, (0, 1))
    assert "no static bound" in standard_integrator.refusal(q, q.node("r"), {"period": 1}, "no static bound here")
    reader = Node("rd", "lava_dense", ("r",), TensorType((2,)), {"weight_exp": 0, "num_message_bits": 8},
                  {"weight": np.eye(2, dtype=np.int64)})
    q2 = Graph(q.nodes + (reader,), ("r",))
    assert "read by a process" in standard_integrator.refusal(q2, q2.node("r"), {"period": 1}, (0, 1))
    q3 = Graph(q.nodes[:-1] + (q.node("r").with_(params=dict(q.node("r").params, bias_u=np.int64(1))),), ("r",))
    assert "current bias" in standard_integrator.refusal(q3, q3.node("r"), {"period": 1, "start": 0}, (0, 1))
    assert standard_integrator.refusal(q3, q3.node("r"), {"period": 1, "start": 1}, (0, 1)) is None   # its Dense


def _lava_vs_reference(q: Graph, x: np.ndarray, force: bool = False, monkeypatch=None) -> dict:
    from spikec.core.interpreter import run
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.simulate import run_lava
    if force:   # pretend v's limit were higher: Lava's LIF is then used where it fires
        monkeypatch.setattr(standard_integrator, "THETA", 2 ** 24)
    net, arrays = lower(q)
    trace = run(lops.with_readouts(q), {"x": x}, integer=True)   # its final u and v compared too
    r = compare(net, trace, run_lava(net, arrays, {"x": x}), x.shape[0])
    return {"type": next(p["type"] for p in net["processes"] if p["name"] == "r"), "trace": trace, **r}


@needs_lava
def test_lavas_lif_is_exact_at_the_top_of_the_bound_and_fires_beyond(monkeypatch):
    rng = np.random.default_rng(5)
    x = (rng.random((24, 2, 258)) < 0.5).astype(np.int64)
    x[2:22] = 1   # twenty all-ones steps: v climbs to within 64 of the top (and to -128 * 65535 + 128 below)
    r = _lava_vs_reference(_graph(_edge(), bias=(3, -3)), x)
    assert r["type"] == "LIF" and r["bit_exact"], r["first_mismatches"]
    v = np.asarray(r["trace"].values["r"])
    assert v.max() > 2 ** 23 - 64 - 200 and v.min() < -(2 ** 23) + 400   # the ends of the bound are reached
    kept = _lava_vs_reference(_graph(_edge(extra=2)), x)   # beyond: spikec's SpikecLIF, exact
    assert kept["type"] == "SpikecLIF" and kept["bit_exact"]
    forced = _lava_vs_reference(_graph(_edge(extra=2)), x, force=True, monkeypatch=monkeypatch)
    assert forced["type"] == "LIF" and not forced["bit_exact"]   # Lava's LIF fired and reset v: the refusal is needed
    assert set(forced["mismatch_counts"]) == {"r"}


@needs_lava
def test_norse_li_readouts_compile_to_lavas_lif_or_name_the_blocker(tmp_path):
    import sys
    from pathlib import Path
    pytest.importorskip("norse.torch")
    from spikec.app.driver import CompileOptions, compile_model
    models = Path(__file__).resolve().parent / "framework_models.py"
    np.savez(tmp_path / "x.npz", input=(np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64))
    assert str(models.parent) not in sys.argv
    out = {}
    for factory in ("norse_libox", "norse_li"):
        c = compile_model(CompileOptions(f"{models}:{factory}", inputs=str(tmp_path / "x.npz"), stepping="step",
                                         target="lava"))
        t = c.report["target"]
        assert c.report["equivalent"] and t["bit_exact"], t.get("first_mismatches")
        out[factory] = t
    box = {p["name"]: p for p in out["norse_libox"]["processes"]}["model.3"]
    assert box["type"] == "LIF" and box["chip_ready"]
    (m,) = out["norse_libox"]["standard_readouts"].values()
    assert m["within"] and m["within_bound"] and m["v_measured"][1] > 0
    assert "leaky-integrator read-out as Lava's LIF" in out["norse_libox"]["summary"]
    li = {p["name"]: p for p in out["norse_li"]["processes"]}["model.3"]   # its current bias through a Dense
    assert li["type"] == "LIF" and li["chip_ready"] and "current bias" in li["why"] and "never reached" in li["why"]


@needs_lava
def test_snntorch_membrane_readout_without_reset_is_lavas_lif(tmp_path):
    pytest.importorskip("snntorch")
    from pathlib import Path
    from spikec.app.driver import CompileOptions, compile_model
    from spikec.ir.errors import UnsupportedOp
    models = Path(__file__).resolve().parent / "integrator_models.py"
    np.savez(tmp_path / "x.npz", input=(np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64))
    opts = lambda f: CompileOptions(f"{models}:{f}", inputs=str(tmp_path / "x.npz"), stepping="step", target="lava")
    c = compile_model(opts("mem_none"))
    t = c.report["target"]
    assert c.report["equivalent"] and t["bit_exact"] and t["state_reads_compared"] > 0, t.get("first_mismatches")
    assert {p["name"]: (p["type"], p["chip_ready"]) for p in t["processes"]}["n2.mem"] == ("LIF", True)
    assert t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"]
    a = t["float_vs_fixed"]["per_layer"]["n2.mem"]
    assert a["class_agreement"] == 1.0 and a["state_max_rel_error"] < 0.05, a   # dequantized v / (64 s)
    with pytest.raises(UnsupportedOp, match="spikes too .or, for a membrane read-out, no reset"):
        compile_model(opts("mem_subtract"))   # its mem depends on its spikes: the population must spike
