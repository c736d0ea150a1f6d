"""snnTorch, SpikingJelly and Norse neurons on the Lava target: traced from the frameworks' own modules
(``framework_models.py``), quantized, run in Lava's fixed-point simulator and compared bit for bit with the
integer reference; every population must both fire and rest. Also: the integer reference's reset kinds
against hand-computed sequences, the example SpikingJelly network, state reads (snnTorch's mem, Norse's LI read-out)
recorded as outputs bit-exactly, and the refusal by name of currents as outputs (recurrent neurons and Alpha:
test_framework_recurrent.py).
"""
from pathlib import Path

import numpy as np
import pytest

from spikec.ir.errors import UnsupportedOp
from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
pytest.importorskip("snntorch")
pytest.importorskip("spikingjelly.activation_based")
pytest.importorskip("norse.torch")

HERE = Path(__file__).resolve().parent
MODELS = HERE / "framework_models.py"
EXAMPLES = HERE.parents[2] / "examples" / "frameworks"


def compile_lava(model, stepping, x, tmp_path):
    from spikec.app.driver import CompileOptions, compile_model
    np.savez(tmp_path / "x.npz", input=x)
    return compile_model(CompileOptions(str(model), inputs=str(tmp_path / "x.npz"), stepping=stepping,
                                        target="lava"))


def spikes_in(steps=8, batch=3, n=12, seed=0):
    return (np.random.default_rng(seed).random((steps, batch, n)) < 0.5).astype(np.float64)


@pytest.fixture(scope="module")
def on_spikes(tmp_path_factory):
    """``(factory, stepping) -> Compiled`` of ``framework_models.py``'s factory on ``spikes_in()``, compiled once
    per module (tests only read it)."""
    import functools
    where = tmp_path_factory.mktemp("framework_neurons")
    return functools.cache(lambda factory, stepping: compile_lava(f"{MODELS}:{factory}", stepping, spikes_in(), where))


CASES = {  # factory: (stepping, float op, the integer reset kind, process)
    "leaky_default": ("step", "lif_snntorch", "delayed_subtract", "LIF"),   # the membrane in u (current_reset.py)
    "leaky_immediate": ("step", "lif_snntorch", "snntorch_subtract", "SpikecLIF"),
    "leaky_zero": ("step", "lif", "zero", "LIF"),
    "leaky_none": ("step", "lif_snntorch", "none", "SpikecLIF"),
    "synaptic_default": ("step", "synaptic_snntorch", "delayed_subtract", "SpikecLIF"),
    "synaptic_zero": ("step", "synaptic_snntorch", "delayed_zero", "SpikecLIF"),
    "sj_lif": ("multistep", "lif_sj", "zero", "LIF"),
    "sj_lif_soft": ("multistep", "lif_sj", "subtract", "LIF"),
    "sj_plif_reset": ("multistep", "lif_sj", "zero", "LIF"),
    "sj_if_reset": ("multistep", "lif_sj", "zero", "LIF"),
    "norse_lif": ("step", "lif_norse", "zero", "SpikecLIF"),
    "norse_lif_default": ("step", "lif_norse", "zero", "LIF"),   # its current bias through a Dense
    "norse_box": ("step", "lif_norse", "zero", "LIF"),
}


@pytest.mark.parametrize("factory", list(CASES))
def test_framework_neurons_are_bit_exact_in_lava(factory, on_spikes):
    stepping, op, reset, process = CASES[factory]
    c = on_spikes(factory, stepping)
    t = c.report["target"]
    assert c.report["equivalent"]
    assert t["bit_exact"], t["first_mismatches"]
    assert t["spikes_compared"] > 0 and t["states_compared"] > 0 and t["quantization_checks"]["ok"]
    neurons = [n for n in c.graph.nodes if n.op == op and n.attrs.get("read", "spikes") == "spikes"]
    assert len(neurons) == 2
    for n in neurons:
        layer = t["quantization"]["layers"][n.name]
        assert (layer["reset"], t["lowering"][n.name]["process"]) == (reset, process)
        agree = t["float_vs_fixed"]["per_layer"][n.name]
        assert 0 < agree["fixed_rate"] < 1, (n.name, agree)   # the neurons fire and rest
        assert agree["spike_agreement"] >= 0.9


def test_sj_fires_on_ge_and_synaptic_bias_is_a_current(on_spikes):
    t = on_spikes("sj_if_reset", "multistep").report["target"]   # the compiles of the test above
    assert all(v.get("fire", "").startswith("v >= vth") for v in t["quantization"]["layers"].values()
               if v.get("process") == "SpikecLIF")
    t = on_spikes("synaptic_default", "step").report["target"]
    layers = [v for v in t["quantization"]["layers"].values() if "current_decay_quantization" in v]
    assert layers and all(v["du"] == 4095 - round(4096 * 0.6) for v in layers)


def test_spikingjelly_example_network_is_bit_exact(tmp_path):
    x = (np.random.default_rng(0).random((6, 2, 1, 12, 12)) < 0.4).astype(np.float64)
    c = compile_lava(f"{EXAMPLES / 'spikingjelly_csnn.py'}:multistep", "multistep", x, tmp_path)
    t = c.report["target"]
    assert t["bit_exact"], t["first_mismatches"]
    assert {n.op for n in c.graph.nodes} >= {"lif_sj"}


def _lava_lif(reset, x, vth=1, fire="gt", dv=0):
    """The integer reference lava_lif on one neuron: (spikes, membrane, v) as lists."""
    import torch
    from spikec.ir.graph import Node, TensorType
    from spikec.core.interpreter import run
    from spikec.ir.graph import Graph
    from spikec.targets.lava.ops import with_readouts
    p = {"du": np.int64(4095), "dv": np.int64(dv), "vth": np.int64(vth), "bias_mant": np.int64(0),
         "bias_exp": np.int64(0)}
    attrs = {"reset": reset, "output": "spikes", "process": "SpikecLIF", "fire": fire}
    g = Graph((Node("in", "input", (), TensorType((1,), "integer", 1000)),
               Node("n", "lava_lif", ("in",), TensorType((1,), "binary"), attrs, p)), ("n",), {})
    xs = torch.tensor(np.asarray(x, dtype=np.float64).reshape(-1, 1, 1))
    tr = run(with_readouts(g), {"in": xs.numpy()}, integer=True)
    return [tr.values[k].reshape(-1).astype(int).tolist() for k in ("n", "n.membrane", "n.v")]


def test_integer_reset_kinds():
    # theta = 64; inputs in weight units (<< 6): 2 -> 128 crosses, the reset follows by kind
    s, m, v = _lava_lif("delayed_subtract", [3, 0, 0, 0])
    assert s == [1, 1, 0, 0] and m == [192, 128, 64, 64] and v == m  # the reset acts one step later
    assert _lava_lif("delayed_subtract", [2, 0, 0], dv=2048)[1] == [128, 0, 0]   # after the decay: 64 - 64
    assert _lava_lif("subtract", [2, 0, 0], dv=2048)[2] == [64, 32, 16]           # before it
    s, m, v = _lava_lif("subtract", [2, 0, 0])
    assert s == [1, 0, 0] and v == [64, 64, 64]
    s, m, v = _lava_lif("snntorch_subtract", [3, 0, 0])
    assert s == [1, 0, 0] and v == [128, 128, 128]                  # r = [128 > 64]: 128 - 64 does not fire
    s, m, v = _lava_lif("delayed_zero", [2, 2, 2])
    assert s == [1, 0, 1] and m == [128, 0, 128]                    # the step after a spike is zeroed
    s, m, v = _lava_lif("none", [2, 0])
    assert s == [1, 1] and v == [128, 128]
    assert _lava_lif("zero", [1, 0], fire="ge")[0] == [1, 0]        # v = theta fires on >=
    assert _lava_lif("zero", [1, 0], fire="gt")[0] == [0, 0]


STATE_OUTS = {  # factory: (stepping, the recorded output, its integer output, the population's process)
    "leaky_mem_out": ("step", "3.mem", "u", "LIF"),          # the membrane in u, read by Lava's Monitor
    "leaky_mem_immediate": ("step", "3.mem", "v", "SpikecLIF"),
    "leaky_mem_zero": ("step", "3.mem", "membrane", "SpikecLIF"),
    "leaky_mem_zero_immediate": ("step", "3.mem", "v", "SpikecLIF"),
    "norse_li": ("step", "model.3", "v", "LIF"),             # current_bias.py
    "norse_li_leak": ("step", "model.3", "v", "LIF"),
    "norse_libox": ("step", "model.3", "v", "LIF"),
}


@pytest.mark.parametrize("factory", list(STATE_OUTS))
def test_state_reads_and_norse_li_are_recorded_bit_exactly(factory, on_spikes):
    stepping, out, integer, process = STATE_OUTS[factory]
    c = on_spikes(factory, stepping)
    t = c.report["target"]
    assert t["bit_exact"], t["first_mismatches"]
    assert t["state_reads_compared"] > 0 and t["quantization_checks"]["ok"]
    a = t["float_vs_fixed"]["per_layer"][out]
    assert a["state_max_rel_error"] < 0.5, a    # approximate: dequantized with v / (64 s) (+ v_leak)
    layers = t["quantization"]["layers"]
    layer = layers.get(out) or next(v for v in layers.values() if out in v.get("state_reads", {}))
    assert layer["process"] == process
    if out in layer.get("state_reads", {}):
        assert layer["state_reads"][out].startswith(f"integer {integer}")


def test_currents_as_outputs_are_refused_by_name(tmp_path):
    # snnTorch's syn reaches the IR as its own never-firing lif read as membrane (spikec/frontend/snntorch.py):
    # refused as that read-out, by name
    with pytest.raises(UnsupportedOp, match=r"node '3\.syn'.*synaptic current"):
        compile_lava(f"{MODELS}:synaptic_out", "step", spikes_in(), tmp_path)
