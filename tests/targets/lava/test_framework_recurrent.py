"""Recurrent snnTorch neurons on the Lava target: RLeaky (one_to_one V, all-to-all linear) and RSynaptic (linear,
conv2d), traced from snnTorch's own modules (``recurrent_models.py``), each recurrence a Dense/Conv from the
population's s_out back to its own a_in. Lava's fixed-point run must equal the integer reference bit for bit, every
recurrent population must fire and rest, and the recurrent weights must change spikes (zeroing them in the integer
reference, and in the float source, changes the output). Also: the integer reference's loop latency on one neuron
(step t reads the spikes of step t - 1), and Alpha refused by name with its reason.
"""
from pathlib import Path

import numpy as np
import pytest

from spikec.ir.errors import UnsupportedOp
from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
pytest.importorskip("snntorch")

HERE = Path(__file__).resolve().parent
MODELS = HERE / "recurrent_models.py"


def compile_lava(factory, x, tmp_path):
    from spikec.app.driver import CompileOptions, compile_model
    np.savez(tmp_path / "x.npz", input=x)
    return compile_model(CompileOptions(f"{MODELS}:{factory}", inputs=str(tmp_path / "x.npz"), stepping="step",
                                        target="lava"))


def spikes_in(shape, steps=8, batch=3, seed=0):
    return (np.random.default_rng(seed).random((steps, batch) + shape) < 0.5).astype(np.float64)


CASES = {  # factory: (input step shape, {population: (float op, recurrence, Lava synapse of the loop)})
    # RLeaky's subtract reset: Lava's LIF with the membrane in u (current_reset.py); RSynaptic's current is u
    "rleaky_mixed": ((12,), {"1": ("rleaky_snntorch", "one_to_one", "Dense", "LIF"),
                             "3": ("rleaky_snntorch", "linear", "Dense", "LIF")}),
    "rsynaptic_linear": ((12,), {"1": ("synaptic_snntorch", "linear", "Dense", "SpikecLIF"),
                                 "3": ("synaptic_snntorch", "linear", "Dense", "SpikecLIF")}),
    "rsynaptic_conv": ((1, 6, 6), {"1": ("synaptic_snntorch", "conv2d", "Conv", "SpikecLIF")}),
}


def _integer_spikes(graph, x, zero_rec=False):
    """The integer reference's output spikes of ``graph`` deployed as the target deploys it; ``zero_rec`` runs it
    again with every recurrent weight zeroed."""
    from spikec.core.interpreter import run
    from spikec.ir.graph import Graph
    from spikec.targets.lava import deploy
    name = graph.inputs[0].name
    q = deploy(graph, {name: x})[0].graph
    if zero_rec:
        q = Graph(tuple(n.with_(params={**n.params, "rec_weight": np.zeros_like(n.params["rec_weight"])})
                        if "rec_weight" in n.params else n for n in q.nodes), q.outputs, q.meta)
    tr = run(q, {name: x}, integer=True)
    return {o: np.asarray(tr.values[o]) for o in q.outputs}


@pytest.mark.parametrize("factory", list(CASES))
def test_recurrent_neurons_are_bit_exact_in_lava(factory, tmp_path):
    shape, pops = CASES[factory]
    x = spikes_in(shape)
    c = compile_lava(factory, x, tmp_path)
    t = c.report["target"]
    assert c.report["equivalent"]
    assert t["bit_exact"], t["first_mismatches"]
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    nodes = {n.name: n for n in c.graph.nodes}
    procs = {p["name"]: p["type"] for p in t["processes"]}
    for pop, (op, rec, synapse, process) in pops.items():
        assert nodes[pop].op == op and nodes[pop].attrs["recurrent"] == rec
        assert procs[pop] == process and procs[f"{pop}.recurrent"] == synapse
        rate = t["float_vs_fixed"]["per_layer"][pop]["fixed_rate"]
        assert 0.0 < rate < 1.0, f"population {pop} must fire and rest (rate {rate})"
        layer = t["quantization"]["layers"][pop]
        assert layer["recurrence"]["latency"].startswith("one Lava step")
        assert layer["recurrence"]["weights_clipped"] == 0
        # the self-check rounds the recurrent weights against the float source too (<= 1/2 LSB)
        assert f"{pop}.recurrent" in t["quantization_checks"]["weight_rounding"]["per_layer"][pop]["streams"]
    # the recurrent weights change spikes: in the integer reference Lava matched, and in the float source
    with_rec, without = _integer_spikes(c.graph, x), _integer_spikes(c.graph, x, zero_rec=True)
    assert any(not np.array_equal(with_rec[o], without[o]) for o in with_rec)


@pytest.mark.parametrize("factory", list(CASES))
def test_zeroed_recurrent_weights_change_the_float_source(factory):
    """The float source with the recurrence zeroed spikes differently on the tests' inputs (snnTorch itself)."""
    import importlib.util
    import torch
    spec = importlib.util.spec_from_file_location("recurrent_models", MODELS)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    x = torch.from_numpy(spikes_in(CASES[factory][0])).float()

    def run(net):
        from snntorch import utils
        utils.reset(net)
        with torch.no_grad():
            return torch.stack([net(x_t) for x_t in x])
    assert not torch.equal(run(getattr(m, factory)()), run(getattr(m, f"{factory}_norec")()))


def _one_neuron(x, w, reset="zero"):
    """The integer reference lava_lif on one neuron with a self-synapse of weight ``w``: (spikes, v)."""
    import torch
    from spikec.core.interpreter import run
    from spikec.ir.graph import Graph, Node, TensorType
    from spikec.targets.lava.ops import with_readouts
    p = {"du": np.int64(4095), "dv": np.int64(0), "vth": np.int64(1), "bias_mant": np.int64(0),
         "bias_exp": np.int64(0), "rec_weight": np.array([[w]], dtype=np.int64)}
    attrs = {"reset": reset, "output": "spikes", "process": "SpikecLIF", "recurrent": "dense", "rec_weight_exp": 0}
    g = Graph((Node("in", "input", (), TensorType((1,), "integer", 1000)),
               Node("n", "lava_lif", ("in",), TensorType((1,), "binary"), attrs, p)), ("n",), {})
    xs = torch.tensor(np.asarray(x, dtype=np.float64).reshape(-1, 1, 1))
    tr = run(with_readouts(g), {"in": xs.numpy()}, integer=True)
    return [tr.values[k].reshape(-1).astype(int).tolist() for k in ("n", "n.v")]


def test_integer_reference_reads_the_previous_steps_spikes():
    # theta = 64; one input of 3 (192) fires at step 0; the loop delivers w << 6 at step 1, not at step 0
    assert _one_neuron([3, 0, 0, 0], 2) == [[1, 1, 1, 1], [0, 0, 0, 0]]         # self-excitation keeps it firing
    assert _one_neuron([3, 0, 0, 0], -2) == [[1, 0, 0, 0], [0, -128, -128, -128]]  # one inhibition, then silence
    assert _one_neuron([3, 0, 0, 0], 1) == [[1, 0, 0, 0], [0, 64, 64, 64]]      # 64 is not > 64: no spike
    assert _one_neuron([3, 0, 0, 0], 0) == [[1, 0, 0, 0], [0, 0, 0, 0]]


def test_alpha_is_refused_by_name(tmp_path):
    with pytest.raises(UnsupportedOp, match=r"alpha_snntorch.*two currents.*one current u"):
        compile_lava("alpha", spikes_in((12,)), tmp_path)
