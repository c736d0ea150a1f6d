"""The subtract reset with the membrane in Lava's current (``spikec/targets/lava/current_reset.py``, the Lava target's
default; ``lava_reset='subtract'`` keeps SpikecLIF): Lava's standard LIF, a diagonal Sparse self-synapse of ``-vth``;
one term, the carry ``trunc(v / 4096)``, away from the carry-free integer subtract reset, measured against it; Lava
runs it bit for bit."""
import tempfile
from pathlib import Path

import numpy as np
import pytest

from spikec.core.interpreter import run
from spikec.targets import get_target
from spikec.targets.lava import current_reset, deploy, lava_available
from spikec.targets.lava.limits import int_inputs
from spikec.targets.lava.ops import with_readouts

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
HERE = Path(__file__).resolve().parent


def _graph(factory, stepping="step", seed=0, steps=8):
    from spikec.app.driver import CompileOptions, compile_model
    x = (np.random.default_rng(seed).random((steps, 3, 12)) < 0.5).astype(np.float64)
    with tempfile.TemporaryDirectory() as d:
        np.savez(Path(d) / "x.npz", input=x)
        c = compile_model(CompileOptions(f"{HERE / 'framework_models.py'}:{factory}", inputs=str(Path(d) / "x.npz"),
                                         stepping=stepping, target="none"))
    return c.graph, x


@pytest.mark.parametrize("x", [0, 1, 200, 255, 256, 257, 511, 2880, 3517, 32640, 32641, 131071])
def test_eight_bits_is_the_largest_or_nearest_8_bit_mantissa(x):
    m, e = current_reset.eight_bits(x)
    assert 0 <= m <= 255 and 0 <= e <= 7 and m << e <= x
    if x <= 255 << 7:   # the largest: the next mantissa at this exponent (or a smaller one) is above x
        assert (m + 1) << e > x or m == 255
    mu, eu = current_reset.eight_bits(x, up=True)
    assert mu <= 255 and abs((mu << eu) - x) <= max(1 << eu >> 1, x - (255 << 7))


STEPPING = {"sj_lif_soft": "multistep"}


def _deployed(factory, **kw):
    g, x = _graph(factory, STEPPING.get(factory, "step"), **kw)
    q, _, _ = deploy(g, x)   # the default
    return g, x, q


@pytest.mark.parametrize("factory", ["leaky_default", "leaky_mem_out", "sj_lif_soft"])
def test_the_variant_differs_from_the_exact_neuron_only_by_the_carry_and_the_reset_rounding(factory):
    """Property, per changed neuron of the first layer (the same inputs in both): snnTorch's delayed subtract
    differs only by the carry: the first step where its spikes differ from the exact integer reference's has a
    nonzero carry (``v - u - b`` before the spike test), and until then the variant's ``u`` *is* the exact membrane
    (the post-step ``v``). An immediate subtract's ``u`` stays within the reset's rounding (half a weight LSB, 32
    internal units, per spike, plus one unit of decay truncation per step) of the exact pre-reset membrane."""
    g, x, q = _deployed(factory)
    assert q.exact is not None and q.variant["changed"]
    xi = int_inputs(q.graph, x)
    var = run(with_readouts(q.graph), xi, integer=True).values
    ref = run(with_readouts(q.exact), xi, integer=True).values
    first = q.variant["changed"][0]
    n = q.graph.node(first)
    s_var, s_ref, u = np.asarray(var[first]), np.asarray(ref[first]), np.asarray(var[f"{first}.u"])
    T = s_var.shape[0]
    if n.attrs["membrane_in_u"] == "subtract":
        spikes_before = np.cumsum(np.concatenate([np.zeros_like(s_var[:1]), s_var[:-1]]), 0)
        steps = np.arange(T).reshape((T,) + (1,) * (u.ndim - 1))
        assert (np.abs(u - ref[f"{first}.membrane"]) <= 33 * spikes_before + steps).all()
        return
    b = np.asarray(n.params["bias_mant"])
    carry = var[f"{first}.membrane"] - u - (b.reshape(b.shape + (1,) * (u.ndim - 3)) if b.ndim else b)
    diff = s_var != s_ref
    for idx in zip(*np.nonzero(diff.any(0))):
        t0 = int(np.argmax(diff[(slice(None),) + idx]))
        assert carry[(t0,) + idx] != 0, (idx, t0)
    agree_until = np.where(diff.any(0), np.argmax(diff, 0), T)
    for t in range(T):
        ok = agree_until > t
        assert np.array_equal(u[t][ok], ref[f"{first}.v"][t][ok])


def test_the_rewrite_before_and_after():
    """The population's parameters before and after: du = dv - 1, dv = 4095, a zero reset, a diagonal -vth
    self-synapse, the bias moved to the current; vth an 8-bit mantissa; the exact graph keeps the custom form."""
    g, x, q = _deployed("leaky_default")
    for name in q.variant["changed"]:
        before, after = q.exact.node(name), q.graph.node(name)
        assert before.attrs["reset"] == "delayed_subtract" and before.attrs.get("process") == "SpikecLIF"
        assert int(after.params["du"]) == int(before.params["dv"]) - 1 and int(after.params["dv"]) == 4095
        assert after.attrs["reset"] == "zero" and after.attrs["process"] == "LIF"
        vth = int(before.params["vth"])
        assert current_reset.representable_vth(vth) == vth == int(after.params["vth"])
        assert -int(after.params["reset_weight"]) << after.attrs["reset_weight_exp"] == vth
        bias = np.left_shift(np.asarray(before.params["bias_mant"]), np.asarray(before.params["bias_exp"]))
        assert np.array_equal(np.asarray(after.params.get("bias_u", 0)) << 6, bias)


@pytest.mark.parametrize("factory,why", [("leaky_zero", None), ("leaky_immediate", "snntorch_subtract")])
def test_it_changes_nothing_it_must_not(factory, why):
    """A zero reset is Lava's LIF already: the deployment is the one without the form (no requantization, no
    carry-free graph kept); snnTorch's reset_delay=False subtract is another reset kind: kept as SpikecLIF, its
    reason on the node for the chip-blocker line; per-channel thresholds are no Lava LIF."""
    g, x, q = _deployed(factory)
    plain = deploy(g, x, {"lava_reset": "subtract"})[0]
    assert q.exact is None and q.variant["changed"] == []
    if why is None:
        from spikec.core.serialize import graph_to_json
        assert q.variant["refused"] == {} and graph_to_json(q.graph) == graph_to_json(plain.graph)
        assert all(np.array_equal(v, plain.graph.node(n.name).params[k]) for n in q.graph.nodes
                   for k, v in n.params.items())
    else:
        assert q.variant["refused"] and all(why in w for w in q.variant["refused"].values())
        for name, w in q.variant["refused"].items():
            assert q.graph.node(name).attrs["membrane_in_u_refused"] == w
            assert q.graph.node(name).params.keys() == plain.graph.node(name).params.keys()
    pop = next(n for n in plain.graph.nodes if n.op == "lava_lif" and n.attrs.get("output", "spikes") == "spikes")
    per_channel = pop.with_(attrs=dict(pop.attrs, reset="delayed_subtract"),
                            params=dict(pop.params, vth=np.full(pop.type.shape[:1], 640, dtype=np.int64)))
    assert "per-channel" in current_reset.refusal(plain.graph, per_channel)


@needs_lava
@pytest.mark.parametrize("factory", ["leaky_default", "leaky_mem_out", "sj_lif_soft"])
def test_lava_runs_the_variant_bit_exact_on_standard_processes_only(factory):
    g, x = _graph(factory, STEPPING.get(factory, "step"))
    res = get_target("lava")(g, x, run(g, x), {"lava_reset": "current"})
    t = res.report
    plain = get_target("lava")(g, x, run(g, x), {"lava_reset": "subtract"}).report
    assert res.ok is True and t["bit_exact"] is True, t["first_mismatches"]   # Lava runs it bit for bit
    ready = t["chip_readiness"]
    assert ready["cpu_only"] == 0 and ready["chip_ready"] == ready["processes"], ready
    assert plain["chip_readiness"]["cpu_only"] > 0   # the carry-free SpikecLIF is not
    types = {p["type"] for p in t["processes"]}
    assert "Sparse" in types and "SpikecLIF" not in types
    m = t["membrane_in_u"]
    assert m["populations"] and all(0 < a["spike_agreement"] <= 1 for a in m["per_population"].values())
    assert "the membrane in u" in t["summary"] and "approximate_variant" not in t
    if factory == "leaky_mem_out":   # snnTorch's mem read from Lava's u by its Monitor, compared bit for bit
        assert t["state_reads_compared"] > 0


@needs_lava
def test_a_conv_population_and_verify_read_back(tmp_path):
    """The digits network (a (C, H, W) subtract-reset population): every process chip-ready, Lava bit-exact with the
    variant; verify re-derives the written variant and re-runs it, labelled approximate; a corrupted self-synapse
    weight fails it."""
    import spikec
    root = HERE.parents[2] / "examples" / "digits"
    with np.load(root / "inputs.npz") as z:
        x = z["input"][:, :4]
    c = spikec.compile(f"{root / 'model.py'}:small", x, weights=str(root / "checkpoint.pt"), targets=("lava",))
    t = c.report["targets"]["lava"]
    assert t["bit_exact"] is True and t["chip_readiness"]["cpu_only"] == 0 and c.report["equivalent"] is True
    assert t["membrane_in_u"]["populations"] == ["lif1"]
    out = c.save(tmp_path / "out")
    r = spikec.verify(out)
    assert r["target_lava"]["equivalent"] is True and "approximate" not in r["target_lava"]
    params = out / "lava" / "params.npz"
    with np.load(params) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["lif1.reset/weight"] = arrays["lif1.reset/weight"] + 1
    np.savez(params, **arrays)
    assert spikec.verify(out)["target_lava"]["equivalent"] is False


@needs_lava
def test_an_outdir_written_with_spikeclif_still_verifies(tmp_path):
    """An OUTDIR whose subtract resets were written as SpikecLIF (``lava_reset='subtract'``, or spikec before the
    membrane in u) re-derives as written: verify passes, saying how it re-derived it."""
    import json
    import spikec
    x = (np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64)
    c = spikec.compile(f"{HERE / 'framework_models.py'}:leaky_default", x, targets=("lava",), stepping="step",
                       lava_reset="subtract")
    out = c.save(tmp_path / "out")
    report = json.loads((out / "report.json").read_text())
    report["options"].pop("lava_reset")   # as an older compile wrote it: no option, SpikecLIF
    (out / "report.json").write_text(json.dumps(report))
    r = spikec.verify(out)
    assert r["target_lava"]["equivalent"] is True, r["target_lava"]


@needs_lava
@pytest.mark.parametrize("factory", ["rleaky", "leaky_if"])
def test_a_recurrence_and_an_integrate_and_fire_take_the_membrane_in_u_too(factory):
    """snnTorch's RLeaky: its own recurrence (a Dense) and the reset's Sparse both into a_in; an IF (beta = 1):
    u keeps 4095/4096 per step (du = 0), noted. Both chip-ready as a whole, bit-exact in Lava, compared with their
    carry-free form."""
    g, x = _graph(factory)
    res = get_target("lava")(g, x, run(g, x), {})
    t = res.report
    assert res.ok is True and t["bit_exact"] is True, t["first_mismatches"]
    assert t["chip_readiness"]["cpu_only"] == 0, t["chip_readiness"]
    m = t["membrane_in_u"]
    assert len(m["populations"]) == 2 and all(a["spike_agreement"] > 0.9 for a in m["per_population"].values())
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    for pop in m["populations"]:
        assert kinds[pop] == "LIF" and kinds[f"{pop}.reset"] == "Sparse"
        if factory == "rleaky":
            assert kinds[f"{pop}.recurrent"] == "Dense"
        else:
            assert any("4095/4096" in note for note in t["quantization"]["layers"][pop]["notes"])


def test_netx_does_not_take_the_reset_synapse():
    """A bias-free Leaky has nothing else keeping it out of netx: its self-synapse (the subtract reset) must, since
    netx's CUBA blocks are a feed-forward chain; a model.net without it would be another network."""
    from spikec.targets.lava import netx
    g, x, q = _deployed("leaky_no_bias")
    assert q.variant["changed"]
    for pop in q.variant["changed"]:
        assert "reset_weight" in q.graph.node(pop).params and "bias_u" not in q.graph.node(pop).params
    info = netx.export_info(q.graph)
    assert not info["exportable"]
    assert {b["node"] for b in info["blocking_nodes"] if "membrane in u" in b["why"]} == set(q.variant["changed"])
