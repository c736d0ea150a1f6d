"""Lava-target checks driven with the input that triggers them (each was a one-line bug the other tests missed):

* a read-out of AND spikes is deployed unscaled only when its integers are exact (weight-1 synapses, no bias):
  with other weights or a bias it is scaled, and the integer reference's read-out over its scale stays close to
  the float one (bit_exact alone cannot see this: Lava and the reference share the deployed integers);
* a Norse LIF's reset level is shifted by ``v_leak`` like its state (``v_reset - v_leak`` in integer units);
* ``verify`` of an exact-source deployment fails on an array the lowering never wrote and on a changed integer
  graph, and so does ``verify`` of a calibrated one (one Lava run each, one sample, three steps);
* a Norse LI read-out's state is dequantized with its ``v_leak``.

Only the verify tests need Lava; the others run the quantizer and the integer reference."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snn
from spikec.core.interpreter import run
from spikec.targets.lava import deploy, lava_available
from spikec.targets.lava.ops import with_readouts

HERE = Path(__file__).resolve().parent
LOIHI = HERE.parents[2] / "examples" / "digits_loihi"
needs_lava = pytest.mark.skipif(lava_available() is not None, reason=f"Lava unavailable: {lava_available()}")


def _passes(model, x, shape, kind="binary"):
    from spikec.core.passes import run_passes
    from spikec.frontend import trace
    from spikec.passes import select
    g = trace(model, shape, input_kind=kind)
    return run_passes(g, select("default")[0], x)[0]


def _integer_run(q, x):
    return run(with_readouts(q.graph), {"input": x.astype(np.int64)}, integer=True)


# -- (a) a read-out of AND spikes ---------------------------------------------------------------------------
class _ProductReadout(nn.Module):
    """``out(la * lb)``: a Linear read-out of the AND population of two LIF spike tensors."""

    def __init__(self, weight, bias=None):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.a, self.b = snn.TimeDistributed(nn.Linear(6, 5)), snn.TimeDistributed(nn.Linear(6, 5))
        self.out = snn.TimeDistributed(nn.Linear(5, 3, bias=bias is not None))
        with torch.no_grad():
            for lin in (self.a[0], self.b[0]):
                lin.weight.copy_(0.5 * torch.rand(5, 6, generator=g))
                lin.bias.zero_()
            self.out[0].weight.copy_(torch.tensor(weight))
            if bias is not None:
                self.out[0].bias.copy_(torch.tensor(bias))
        self.la, self.lb = snn.LIF(beta=0.5, threshold=1.0, reset="zero"), snn.LIF(beta=0.7, threshold=0.8)

    def forward(self, x):
        return self.out(self.la(self.a(x)) * self.lb(self.b(x)))


UNIT = [[1.0, 0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]]
REAL = [[0.3, -0.7, 0.2, 0.9, 0.05], [0.11, 0.5, -0.25, 0.4, 0.6], [0.2, 0.2, 0.2, 0.2, 0.2]]


def _deployed_readout(weight, bias=None):
    """``(layer, deployed read-out, expected)``: the read-out's integers over its scale, and the float read-out of
    the AND spikes the integer reference itself produced (the LIFs' own quantization may flip a spike upstream:
    that is measured elsewhere; this isolates the read-out)."""
    x = (np.random.default_rng(0).random((8, 4, 6)) < 0.5).astype(np.float64)
    g = _passes(_ProductReadout(weight, bias).eval(), x, (6,))
    mul = next(n.name for n in g.nodes if n.op == "mul")
    q, _, _ = deploy(g, x)
    assert q.graph.node(mul).op == "lava_and"
    (o,) = g.outputs
    layer = next(l for l in q.layers if l.name == o)
    tr = _integer_run(q, x)
    ands = tr.values[mul].astype(np.float64)
    assert ands.any() and not ands.all()
    expected = ands @ np.asarray(weight).T + (0.0 if bias is None else np.asarray(bias))
    scale = np.asarray(q.graph.meta["scales"][o], dtype=np.float64)
    return layer, tr.values[q.graph.outputs[0]] / scale, expected, scale


def test_a_count_of_and_spikes_through_weight_one_synapses_is_deployed_unscaled_and_exact():
    layer, got, expected, scale = _deployed_readout(UNIT)
    assert layer.info["scaling"].startswith("none: a count of AND spikes")
    assert np.all(scale == 1.0)
    assert np.array_equal(got, expected)   # integer counts, no rounding anywhere


@pytest.mark.parametrize("weight,bias", [(REAL, None), (REAL, [0.3, -0.45, 0.2]), (UNIT, [0.3, -0.45, 0.2])],
                         ids=["real_weights", "real_weights_and_bias", "unit_weights_and_bias"])
def test_a_read_out_of_and_spikes_with_other_weights_or_a_bias_is_scaled(weight, bias):
    layer, got, expected, scale = _deployed_readout(weight, bias)
    assert not layer.info["scaling"].startswith("none"), layer.info["scaling"]
    assert np.all(scale > 8)   # many integer units per float unit, not 1
    err = np.abs(got - expected).max()
    assert err <= 6 * 0.5 / scale.min() + 1e-9, err   # five weights and a bias, each rounded to nearest (1/2 LSB)


# -- (c) Norse: the reset level shifted by v_leak --------------------------------------------------------------
def _norse(v_leak, v_reset):
    norse = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
    sys.path.insert(0, str(HERE))
    from framework_models import _init
    torch.manual_seed(0)
    p = norse.LIFParameters(tau_mem_inv=torch.tensor(250.0), tau_syn_inv=torch.tensor(300.0),   # a_syn 0.3, not 1/2
                            v_leak=torch.tensor(v_leak), v_th=torch.tensor(1.0), v_reset=torch.tensor(v_reset))
    net = norse.SequentialState(nn.Linear(12, 10), norse.LIFCell(p), nn.Linear(10, 6), norse.LIFCell(p))
    return _init(net, 8, gain=8.0, bias=0.5).double()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_norse_reset_level_is_shifted_by_v_leak():
    from spikec.frontend.stepping import adapt
    from spikec.targets.lava.resources import agreement
    v_leak, v_reset = 0.5, -0.5   # the shift is half the threshold: a reset to v_reset unshifted is far off
    x = (np.random.default_rng(0).random((12, 3, 12)) < 0.5).astype(np.float64)
    g = _passes(adapt(_norse(v_leak, v_reset), "step"), x, (12,))
    q, _, _ = deploy(g, x)
    scale = q.graph.meta["scales"]
    for name in ("model.1", "model.3"):
        n = q.graph.node(name)
        assert n.attrs["reset"] == "zero"
        assert int(n.params["v_reset"]) == round(64 * scale[name] * (v_reset - v_leak)), name   # the shifted level
        assert int(n.params["vth"]) == round(scale[name] * (1.0 - v_leak)), name              # as the threshold
    per_layer = agreement(g, run(g, x), q, _integer_run(q, x))["per_layer"]
    assert 0.3 < per_layer["model.1"]["float_rate"] < 0.7    # it fires and rests: resets happen
    assert per_layer["model.1"]["spike_agreement"] >= 0.98, per_layer


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("v_leak", [0.2, -0.2])
def test_a_norse_subtract_reset_with_a_leak_is_refused_by_name(v_leak):
    """LIFBox with reset_subtract: the state is shifted by v_leak, so Lava's subtract of the threshold is wrong."""
    norse = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
    from norse.torch.functional.reset import reset_subtract
    from spikec.ir.errors import UnsupportedOp
    from spikec.frontend.stepping import adapt
    torch.manual_seed(0)
    p = norse.LIFBoxParameters(tau_mem_inv=torch.tensor(250.0), v_leak=torch.tensor(v_leak),
                               v_th=torch.tensor(0.5), reset_method=reset_subtract)
    net = norse.SequentialState(nn.Linear(12, 6), norse.LIFBoxCell(p)).double()
    x = (np.random.default_rng(0).random((4, 2, 12)) < 0.5).astype(np.float64)
    g = _passes(adapt(net, "step"), x, (12,))
    with pytest.raises(UnsupportedOp, match="subtract reset with v_leak != 0"):
        deploy(g, x)


# -- (b) exact-source verify: every array the lowering writes, and nothing else -------------------------------
def _loihi_model():
    spec = importlib.util.spec_from_file_location("digits_loihi_model_blind", LOIHI / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.small()
    m.load_state_dict(torch.load(LOIHI / "checkpoint.pt"))
    return m


@pytest.fixture(scope="module")
def exact():
    from spikec.frontend.tracing import trace
    from spikec.targets.lava import exact_source
    from spikec.targets.lava.lower import lower
    g = trace(_loihi_model(), (1, 8, 8))
    q = exact_source.integer_graph(g)
    net, arrays = lower(q)
    x = {"input": (np.random.default_rng(0).random((3, 1, 1, 8, 8)) < 0.5).astype(np.float64)}
    return g, q, net, arrays, x


@needs_lava
def test_exact_source_verify_fails_on_an_array_the_lowering_never_wrote(exact):
    from spikec.targets.lava import exact_source
    g, q, net, arrays, x = exact
    extra = dict(arrays, **{"planted/weights": np.ones((2, 2), dtype=np.int64)})
    r = exact_source.verify_exact(g, x, q, net, extra)
    assert r["bit_exact"] is True                  # the Lava run itself does not read it
    assert r["equivalent"] is False and r["arrays_differing_from_lowering"] == ["planted/weights"]


@needs_lava
def test_exact_source_verify_fails_on_a_changed_integer_graph(exact):
    from spikec.targets.lava import exact_source
    g, q, net, arrays, x = exact
    n = next(n for n in q.nodes if n.op == "lava_lif")
    changed = q.with_node(n.with_(params={**n.params, "vth": n.params["vth"] + 1})) if hasattr(q, "with_node") \
        else type(q)(tuple(m.with_(params={**m.params, "vth": m.params["vth"] + 1}) if m.name == n.name else m
                           for m in q.nodes), q.outputs, q.meta)
    r = exact_source.verify_exact(g, x, changed, net, arrays)
    assert r["quantized_rederived"]["equal"] is False and r["equivalent"] is False


def test_exact_source_lowering_is_deterministic(exact):
    """What verify compares against: lowering the same integer graph twice writes the same arrays."""
    from spikec.targets.lava.lower import lower
    _, q, _, arrays, _ = exact
    _, again = lower(q)
    assert sorted(again) == sorted(arrays) and all(np.array_equal(again[k], arrays[k]) for k in arrays)


# -- calibrated verify: every array the lowering writes, and nothing else --------------------------------------
@needs_lava
def test_verify_of_a_calibrated_lava_outdir_fails_on_an_array_the_lowering_never_wrote(tmp_path):
    from click.testing import CliRunner
    from spikec.app.cli import main
    from spikec.targets.lava.lower import load_network, save_network
    model = HERE.parents[1] / "app" / "models.py"
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", f"{model}:one_output", "--target", "lava", "--batch", "1",
                                    "--steps", "3", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
    net, arrays = load_network(out / "lava")
    save_network(net, dict(arrays, **{"planted/weights": np.ones((2, 2), dtype=np.int64)}), out / "lava")
    from spikec.app.verify import verify_outdir
    lava = verify_outdir(out)["target_lava"]
    assert lava["bit_exact"] is True   # the Lava run itself does not read it
    assert lava["equivalent"] is False and lava["arrays_differing_from_lowering"] == ["planted/weights"]


# -- a Norse LI read-out's state, dequantized with its v_leak ------------------------------------------------------
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_norse_li_state_read_out_is_dequantized_with_its_v_leak():
    pytest.importorskip("norse.torch", reason="Norse is an optional extra")
    from spikec.frontend.stepping import adapt
    from spikec.targets.lava.resources import agreement
    sys.path.insert(0, str(HERE))
    from framework_models import norse_li_leak   # LIF -> LI with v_leak = 0.2, its v the output
    x = (np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64)
    g = _passes(adapt(norse_li_leak().double(), "step"), x, (12,))
    q, _, _ = deploy(g, x)
    (out,) = g.outputs
    a = agreement(g, run(g, x), q, _integer_run(q, x))["per_layer"][out]
    assert a["dequantized_as"] == "v_int / (64 s) + v_leak"
    assert a["state_rms_error"] < 0.2 / 4, a   # quantization error only: far below the leak itself
