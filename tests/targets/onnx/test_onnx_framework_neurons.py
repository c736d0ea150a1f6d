"""The frameworks' exact neurons through the ONNX target (``spikec/targets/onnx/framework_emitters.py``): every op
and every ``read`` variant, run in onnxruntime, equals the reference interpreter's kernel bit for bit in float64,
on random and on dyadic inputs (threshold ties), with neurons that both fire and rest, and with every state
read-out a real sequence (not the spikes). Recurrent ``linear`` / ``conv2d`` layers with dyadic weights sum
exactly in any order, so they are bit-exact too; with real weights they agree to a few ulp and spike for spike.
"""
import numpy as np
import pytest

import spikec.frontend.norse  # noqa: F401  (defines lif_norse, li_norse)
import spikec.frontend.snntorch_neurons  # noqa: F401  (defines the snnTorch ops)
import spikec.frontend.spikingjelly  # noqa: F401  (defines lif_sj)
from spikec.core.interpreter import run
from spikec.ir.graph import TensorType
from spikec.targets.onnx import export, run_model
from test_onnx_ops import build, check, dyadic, rng

READS = {"lif_snntorch": ("spikes", "mem"), "synaptic_snntorch": ("spikes", "syn", "mem"),
         "rleaky_snntorch": ("spikes", "mem"), "alpha_snntorch": ("spikes", "syn_exc", "syn_inh", "mem"),
         "lif_norse": ("spikes", "v", "i"), "li_norse": ("v", "i")}


def every_read(op, shape, attrs, params, reads=None):
    """One node per read of the same run: ``n`` (the first read) and ``n.<read>``; all are graph outputs."""
    reads = reads or READS[op]
    names = ["n"] + [f"n.{r}" for r in reads[1:]]
    specs = [(name, op, ("x",), {**attrs, "read": r}, params) for name, r in zip(names, reads)]
    return build(TensorType(shape), specs, outputs=names), dict(zip(reads, names))


def exercised(graph, x, names, spiking=True):
    """The check can fail: the spikes hold both 0 and 1, every state read-out is a real sequence of its own."""
    ref = run(graph, x).values
    if spiking:
        s = ref[names["spikes"]]
        assert s.any() and not s.all(), "the neurons must both fire and rest"
    states = [ref[n] for r, n in names.items() if r != "spikes"]
    for v in states:
        assert not np.isin(v, (0.0, 1.0)).all(), "a state read-out must not look like spikes"
        assert np.unique(v).size > 4
    for a in range(len(states)):
        for b in range(a + 1, len(states)):
            assert not np.array_equal(states[a], states[b])
    return ref


def inputs(seed, shape, T=9, batch=3, mean=0.3, scale=0.6):
    r = rng(seed)
    return [r.normal(mean, scale, (T, batch, *shape)), dyadic(r, (T, batch, *shape), scale=8) * scale]


SCALAR = dict(beta=np.array(0.875), threshold=np.array(0.3))           # 0.3: not a float32 value
PER_CHANNEL = dict(beta=np.array([0.9, 0.5, 1.0]), threshold=np.array([0.3, 1.0, -0.2]))  # < 0: r without s


# -- snnTorch ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
@pytest.mark.parametrize("reset_delay", [True, False])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_lif_snntorch_every_read(reset, reset_delay, per_channel):
    params = PER_CHANNEL if per_channel else SCALAR
    g, names = every_read("lif_snntorch", (3, 4), {"reset": reset, "reset_delay": reset_delay}, params)
    for x in inputs(6, (3, 4)):
        exercised(g, x, names)
        check(g, x, bit_exact=True)


def test_lif_snntorch_mem_is_the_mem_not_the_spikes():
    """The user's bug: a ``read="mem"`` node exported as spikes. The written model's mem output is the mem."""
    g, names = every_read("lif_snntorch", (3,), {"reset": "subtract", "reset_delay": True}, SCALAR)
    x = inputs(1, (3,))[0]
    got = run_model(export(g, x.shape[0]), {"x": x})
    assert np.array_equal(got["n.mem"], run(g, x).values["n.mem"])
    assert not np.isin(got["n.mem"], (0.0, 1.0)).all()


def test_lif_snntorch_resets_by_the_float32_threshold():
    """After a spike, snnTorch subtracts float32(0.3) = 0.30000001192..: 0.35, 0.25, 1e-16 then stays below
    0.3 (no second spike), where subtracting the float64 0.3 would fire at t = 2."""
    g = build(TensorType((1,)), [("n", "lif_snntorch", ("x",), {"reset": "subtract", "reset_delay": False},
                                  dict(beta=np.array(1.0), threshold=np.array(0.3)))])
    x = np.array([0.35, 0.25, 1e-16]).reshape(3, 1, 1)
    assert run(g, x).values["n"].ravel().tolist() == [1.0, 0.0, 0.0]
    check(g, x)


def _recurrence(kind, shape, r, real=False):
    """The recurrence's attrs and params (dyadic weights: exact sums; ``real``: normal weights)."""
    c = shape[0]
    w = (lambda *s: r.normal(0, 0.3, s)) if real else (lambda *s: r.integers(-4, 5, s) / 16)
    if kind == "none":
        return {"recurrent": "none"}, {}
    if kind == "one_to_one":
        return {"recurrent": "one_to_one"}, {"V": np.array(0.3)}
    if kind == "one_to_one_pc":
        return {"recurrent": "one_to_one"}, {"V": np.linspace(-0.5, 0.7, c)}
    if kind == "linear":
        return {"recurrent": "linear"}, {"weight": w(c, c), "bias": w(c)}
    if kind == "linear_nobias":
        return {"recurrent": "linear"}, {"weight": w(c, c)}
    return {"recurrent": "conv2d", "padding": [1, 0]}, {"weight": w(c, c, 3, 1), "bias": w(c)}


def _shape(kind):
    return (3, 4, 5) if kind == "conv2d" else (5,) if kind.startswith("linear") else (3, 4)


SYN_CASES = [("none", "subtract", True), ("none", "zero", False), ("none", "none", False), ("none", "subtract", False),
             ("one_to_one", "subtract", True), ("one_to_one_pc", "zero", True), ("linear", "subtract", True),
             ("linear_nobias", "none", True), ("conv2d", "zero", True)]


@pytest.mark.parametrize("rec,reset,reset_delay", SYN_CASES)
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_synaptic_snntorch_every_read(rec, reset, reset_delay, per_channel):
    shape, r = _shape(rec), rng(3)
    attrs, params = _recurrence(rec, shape, r)
    c = shape[0]
    params.update(alpha=np.linspace(0.5, 0.9, c), beta=np.linspace(0.6, 1.0, c),
                  threshold=np.linspace(-0.2, 1.2, c)) if per_channel else \
        params.update(alpha=np.array(0.75), beta=np.array(0.8), threshold=np.array(0.7))
    g, names = every_read("synaptic_snntorch", shape, {"reset": reset, "reset_delay": reset_delay, **attrs}, params)
    for x in inputs(4, shape, mean=0.15, scale=0.5):
        exercised(g, x, names)
        check(g, x, bit_exact=True)


@pytest.mark.parametrize("rec,reset,reset_delay", [
    ("one_to_one", "subtract", True), ("one_to_one", "zero", False), ("one_to_one_pc", "none", True),
    ("linear", "subtract", False), ("linear", "zero", True), ("linear_nobias", "subtract", True),
    ("conv2d", "subtract", True), ("conv2d", "none", False)])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_rleaky_snntorch_every_read(rec, reset, reset_delay, per_channel):
    shape, r = _shape(rec), rng(5)
    attrs, params = _recurrence(rec, shape, r)
    c = shape[0]
    params.update(beta=np.linspace(0.5, 1.0, c), threshold=np.linspace(-0.2, 1.0, c)) if per_channel else \
        params.update(SCALAR)
    g, names = every_read("rleaky_snntorch", shape, {"reset": reset, "reset_delay": reset_delay, **attrs}, params)
    for x in inputs(7, shape):
        exercised(g, x, names)
        check(g, x, bit_exact=True)


@pytest.mark.parametrize("op", ["synaptic_snntorch", "rleaky_snntorch"])
@pytest.mark.parametrize("rec", ["linear", "conv2d"])
def test_recurrent_layers_with_real_weights(op, rec):
    """Real weights: the MatMul sums in its own order (a few ulp), every spike still identical."""
    shape, r = _shape(rec), rng(8)
    attrs, params = _recurrence(rec, shape, r, real=True)
    params.update(beta=np.array(0.9), threshold=np.array(0.5), **({"alpha": np.array(0.7)}
                                                                  if op == "synaptic_snntorch" else {}))
    g, names = every_read(op, shape, {"reset": "subtract", "reset_delay": True, **attrs}, params)
    x = inputs(9, shape, T=12)[0]
    exercised(g, x, names)
    result = check(g, x)
    assert result["max_rel_diff"] < 1e-12


@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_alpha_snntorch_every_read(reset, per_channel):
    a, b = (np.array([0.9, 0.8, 0.95]), np.array([0.6, 0.5, 0.85])) if per_channel else \
        (np.array(0.9), np.array(0.7))
    tau = np.log(a) / (np.log(b) - np.log(a)) + 1
    params = dict(alpha=a, beta=b, tau=tau, threshold=np.array([0.3, 0.5, 0.2]) if per_channel else np.array(0.3))
    g, names = every_read("alpha_snntorch", (3, 2), {"reset": reset}, params)
    for x in inputs(10, (3, 2), T=12, mean=0.4, scale=0.8):
        exercised(g, x, names)
        check(g, x, bit_exact=True)


# -- SpikingJelly ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("params,decay_input", [
    ({"threshold": 1.0}, False),                                  # IF, soft reset
    ({"threshold": 1.0, "v_reset": -0.25}, False),                # IF, hard reset to -0.25
    ({"threshold": 0.8, "tau": 2.0}, True),                       # LIF, decay_input, soft reset
    ({"threshold": 0.8, "tau": 3.0, "v_reset": 0.0}, False),      # LIF, hard reset
    ({"threshold": 0.8, "tau": 3.0, "v_reset": 0.125}, True),
    ({"threshold": 0.6, "decay": 0.3775406687981454}, True),      # PLIF: decay = sigmoid(-0.5), soft reset
    ({"threshold": 0.6, "decay": 0.3775406687981454, "v_reset": 0.0}, False),
    ({"threshold": 0.6, "decay": 0.7, "v_reset": -0.1}, True),
])
def test_lif_sj(params, decay_input):
    g = build(TensorType((2, 3, 3)), [("n", "lif_sj", ("x",), {"decay_input": decay_input},
                                       {k: np.array(v) for k, v in params.items()})])
    for x in inputs(12, (2, 3, 3), T=10, mean=0.4):
        s = run(g, x).values["n"]
        assert s.any() and not s.all()
        check(g, x, bit_exact=True)


def test_lif_sj_decay_leaks():
    """PLIF's decay is a leak: with it, a constant sub-threshold input settles below threshold (it never fires);
    the same node exported as IF (decay ignored, the user's bug) would integrate it up to a spike."""
    g = build(TensorType((1,)), [("n", "lif_sj", ("x",), {"decay_input": True},
                                  {"threshold": np.array(1.0), "decay": np.array(0.5)})])
    x = np.full((8, 1, 1), 0.6)
    got = run_model(export(g, 8), {"x": x})["n"]
    assert not got.any() and np.array_equal(got, run(g, x).values["n"])


# -- Norse -------------------------------------------------------------------------------------------------
NORSE = dict(dt_tau_mem_inv=np.array(np.float32(0.1), dtype=np.float64), v_leak=np.array(0.0),
             threshold=np.array(0.5), v_reset=np.array(0.0))
NORSE_PC = dict(dt_tau_mem_inv=np.array([0.1, 0.25, 0.05]), v_leak=np.array([0.0, 0.1, -0.2]),
                threshold=np.array([0.5, 0.3, 0.4]), v_reset=np.array([0.0, -0.1, 0.05]))


@pytest.mark.parametrize("current,reset", [(True, "value"), (False, "value"), (False, "subtract")])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_lif_norse_every_read(current, reset, per_channel):
    params = dict(NORSE_PC if per_channel else NORSE)
    if current:
        params["dt_tau_syn_inv"] = np.array([0.2, 0.5, 0.1]) if per_channel else np.array(np.float32(0.2), float)
    reads = READS["lif_norse"] if current else ("spikes", "v")
    g, names = every_read("lif_norse", (3, 4), {"current": current, "reset": reset}, params, reads)
    for x in inputs(13, (3, 4), T=14, mean=0.3 if current else 1.5, scale=1.0):
        exercised(g, x, names)
        check(g, x, bit_exact=True)


@pytest.mark.parametrize("current", [True, False])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_li_norse_every_read(current, per_channel):
    p = NORSE_PC if per_channel else NORSE
    params = {k: p[k] for k in ("dt_tau_mem_inv", "v_leak")}
    if current:
        params["dt_tau_syn_inv"] = np.array([0.2, 0.5, 0.1]) if per_channel else np.array(0.2)
    reads = READS["li_norse"] if current else ("v",)
    g, names = every_read("li_norse", (3, 2, 2), {"current": current}, params, reads)
    for x in inputs(14, (3, 2, 2), T=8):
        exercised(g, x, names, spiking=False)
        check(g, x, bit_exact=True)


def test_float32_variant_runs():
    """``export(..., dtype="float32")`` (fast, not claimed exact) builds every framework neuron, the recurrent
    conv's im2col included, and runs in float32."""
    r = rng(15)
    attrs, params = _recurrence("conv2d", (3, 4, 5), r)
    params.update(beta=np.array(0.9), threshold=np.array(0.5))
    g = build(TensorType((3, 4, 5)), [
        ("r", "rleaky_snntorch", ("x",), {"reset": "subtract", "reset_delay": True, **attrs}, params),
        ("a", "alpha_snntorch", ("r",), {"reset": "zero", "read": "mem"},
         dict(alpha=np.array(0.9), beta=np.array(0.7), threshold=np.array(0.3),
              tau=np.log(0.9) / (np.log(0.7) - np.log(0.9)) + 1)),
        ("n", "lif_norse", ("a",), {"current": False, "reset": "subtract"}, NORSE),
        ("s", "lif_sj", ("n",), {"decay_input": True}, {"threshold": np.array(0.5), "decay": np.array(0.25)}),
    ])
    x = inputs(16, (3, 4, 5))[0]
    got = run_model(export(g, x.shape[0], dtype="float32"), {"x": x.astype(np.float32)})["s"]
    assert got.dtype == np.float32 and got.shape == x.shape
