"""The Lava target beyond LIF conv/dense chains, each compiled in Lava's fixed-point simulator and compared
bit for bit with the integer reference:

- integer-firing neurons as a graded payload (``--passes none``) and unrolled into binary sub-steps
  (``unroll_virtual_steps``: D Lava steps per physical step), max pooling over spikes as OR layers;
- several synaptic streams into one population: a residual sum, the TDM dual kernel (``W_a x_t - W_b x_{t-1}``
  with a Delay(1)) and a Delay(2) stream, through DelayDense and Relay processes;
- SiLIF and CSiLIF custom processes (decays quantized, labelled approximate, measured);
- host partitions (DS-MPA, per-time-step BN) with every host value sent to the chip compared;
- the RIPE-MambaSpike example end to end;
- mutation tests (a delayed weight, an integer neuron's threshold, a host gain) that must fail verification
  and name the population, and refusals that name the node.
Seeded random networks from ``models.py``; Lava is slow, so they are small.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MODELS = HERE / "models.py"


def compile_fixture(factory, batch=3, seed=1, **kw):
    """Shared with every test asking for the same compile (lava_compiled.py): read it, never change it."""
    from lava_compiled import lava
    return lava(f"{MODELS}:{factory}", batch=batch, seed=seed, **kw)


def _exact(c):
    t = c.report["target"]
    assert t["bit_exact"], t["first_mismatches"]
    assert c.report["equivalent"]
    assert t["spikes_compared"] > 0 and t["states_compared"] > 0 and not t["overflow"]
    assert all(v.get("fixed_rate", 1) > 0 for v in t["float_vs_fixed"]["per_layer"].values())   # not vacuous
    print(f"\n{c.report['model'].split(':')[-1]}: {t['summary'].splitlines()[0]}")
    return t


@pytest.fixture(scope="module")
def intfire_both():
    """The same network lowered both ways: graded payloads, and unrolled over D sub-steps."""
    return compile_fixture("intfire_dense", passes="none"), compile_fixture("intfire_dense")


def test_integer_neurons_as_graded_payloads(intfire_both):
    t = _exact(intfire_both[0])
    assert t["graded_payloads_compared"] == 8 * 3 * (12 + 10)
    low = t["lowering"]
    assert low["layers.1"]["process"] == low["layers.3"]["process"] == "SpikecIntFire"
    assert "graded payload" in low["layers.1"]["lowering"] and "graded payload" in low["layers.3"]["lowering"]
    syn = {s["name"]: s for s in t["resources"]["synapse_layers"]}
    assert syn["layers.2.0"]["num_message_bits"] == 3 and syn["layers.4.0"]["num_message_bits"] == 2   # D=4, D=3
    assert t["schedule"]["lava_steps_per_physical_step"] == 1


def test_integer_neurons_unrolled_over_sub_steps(intfire_both):
    graded, unrolled = intfire_both
    t = _exact(unrolled)
    assert t["schedule"]["lava_steps_per_physical_step"] == 4          # max D
    assert "unrolled" in t["lowering"]["layers.1"]["lowering"] and t["graded_payloads_compared"] == 0
    assert t["spikes_compared"] == 8 * 3 * (12 * 4 + 10 * 3 + 8)        # D binary spikes per step per neuron
    # a later layer starts after its producer's D sub-steps: start(layers.3) = start(layers.1) + D + 0 ... by rule
    starts = t["schedule"]["starts"]
    assert starts["layers.3"] == starts["layers.1"] + 4 and starts["layers.5"] == starts["layers.3"] + 3
    # same float network, two lowerings: the unrolled counts are the graded payloads, step by step
    from spikec.core.interpreter import run
    from spikec.targets.lava import deploy
    x = unrolled.io["input"].astype(np.int64)
    qg, qu = deploy(graded.graph, x)[0].graph, deploy(unrolled.graph, x)[0].graph
    a, b = run(qg, x, integer=True).values, run(qu, x, integer=True).values
    assert np.array_equal(b["layers.1"].reshape(8, 4, 3, 12).sum(1), a["layers.1"])
    assert np.array_equal(b["layers.5"], a["layers.5"]) and a["layers.1"].max() > 1


def test_max_pooling_as_or_layers_over_unrolled_spikes():
    t = _exact(compile_fixture("intfire_conv_pool", seed=2))
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert kinds["layers.2.0"] == kinds["layers.5.0"] == "OR"
    assert t["schedule"]["lava_steps_per_physical_step"] == 3
    # an OR output can differ only where one of its k*k inputs differs (union bound over the 2x2 window);
    # the OR itself adds no error
    for name, source in (("layers.2.0", "layers.1"), ("layers.5.0", "layers.4")):
        disagree = 1 - t["float_vs_fixed"]["per_layer"][source]["spike_agreement"]
        assert t["float_vs_fixed"]["per_layer"][name]["spike_agreement"] >= 1 - 4 * disagree


def test_residual_streams_and_tdm_dual_kernel_delays():
    t = _exact(compile_fixture("residual_dense", seed=3))
    procs = {p["name"]: p for p in t["processes"]}
    assert procs["skip.0"]["type"] == "DelayDense"          # the shallower stream waits one Lava step
    assert t["lowering"]["lif3"]["streams"] == 2
    t = _exact(compile_fixture("tdm_dual_kernel_net", seed=4))
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert kinds["conv2.0.past.relay"] == "Relay" and kinds["conv2.0.past"] == "Conv"    # x_{t-1}: Delay(1)
    assert kinds["fc_late.1"] == "DelayDense"                                            # Delay(2) on a Dense
    assert t["lowering"]["lif2"]["streams"] == 2 and t["lowering"]["lif3"]["streams"] == 2
    delays = {d["name"]: d["lava_steps"] for d in t["resources"]["axonal_delays"]}
    assert delays["conv2.0.past.relay"] == 1 and delays["fc_late.1"] == 2


def test_silif_and_csilif_bit_exact_with_approximate_decays():
    t = _exact(compile_fixture("silif_csilif", seed=5))
    layers = t["quantization"]["layers"]
    assert layers["layers.1"]["process"] == "SpikecCSiLIF" and layers["layers.3"]["process"] == "SpikecSiLIF"
    assert layers["layers.1"]["approximate"] and layers["layers.3"]["approximate"]
    assert layers["layers.3"]["decay_quantization"]["decay_max_abs_error"] <= 0.5 / 4096
    dq = layers["layers.1"]["decay_quantization"]
    assert dq["a_re_max_abs_error"] <= 0.5 / 4096 and dq["a_im_max_abs_error"] <= 0.5 / 4096
    assert dq["pole_magnitude_fixed_max"] < 1
    assert t["states_compared"] == 3 * (2 * 4 * 6 * 5 + 6 * 3 * 3 + 7)   # CSiLIF: v and w (real, imaginary)


def test_host_partitions_with_host_values_compared():
    t = _exact(compile_fixture("host_partition", seed=6, batch=2))
    part = t["partitions"]
    assert [h["ops"] for h in part["host"]] == [["dsmpa"], ["bntt"]]
    edges = {tuple(c["edge"]): c for c in part["crossing"]}
    assert edges[("n1.membrane", "host0")]["what"].startswith("membrane")
    assert edges[("conv2.0", "host0")]["what"].startswith("synaptic sum")
    assert edges[("host0", "attn.to.n2")]["direction"] == "to_chip"
    assert part["values_per_step"] == 3 * 144 + 144 + 2 * 45
    assert t["host_values_compared"] == 2 * 6 * (144 + 45)


def test_host_partitions_on_a_sub_step_schedule():
    t = _exact(compile_fixture("intfire_host", seed=8, batch=2))
    assert t["schedule"]["lava_steps_per_physical_step"] == 3
    edges = {tuple(c["edge"]) for c in t["partitions"]["crossing"]}
    assert ("n1.membrane", "host0") in edges and ("n1.count.delay1", "host0") in edges   # membrane, delayed count
    assert t["lowering"]["n1"]["lowering"].startswith("unrolled") and t["host_values_compared"] > 0


def test_ripe_example_maps_end_to_end():
    from spikec.app.driver import CompileOptions, compile_model
    ripe = REPO / "examples" / "ripe"
    c = compile_model(CompileOptions(model=f"{ripe / 'model.py'}:small", weights=str(ripe / "checkpoint.pt"),
                                     inputs=str(ripe / "inputs.npz"), target="lava"))
    t = _exact(c)
    kinds = {p["type"] for p in t["processes"]}
    assert {"SpikecCSiLIF", "SpikecSiLIF", "Host", "Relay", "Conv", "Readout"} <= kinds
    assert sorted({op for h in t["partitions"]["host"] for op in h["ops"]}) == ["bntt", "dsmpa"]
    assert t["host_values_compared"] > 0 and t["spikes_compared"] == 8 * 8 * 2 * (8 * 16 * 16 + 16 * 8 * 8 + 16 * 4 * 4)
    assert t["float_vs_fixed"]["outputs"]["head.2"]["class_agreement"] >= 0.75


# -- mutation tests: one corrupted value in the written network must fail and name the population -------------
def _write(tmp_path, c):
    from spikec.app.driver import write_outdir
    out = write_outdir(tmp_path / "out", c)
    return out, np.load(out / "io.npz")["input"]


def _corrupt(out, key, fn):
    params = out / "lava" / "params.npz"
    with np.load(params) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[key] = fn(arrays[key].copy())
    np.savez(params, **arrays)


@pytest.mark.parametrize("factory,seed,batch,key,population", [   # the compiles of the tests above where one fits
    ("residual_dense", 3, 3, "skip.0/weights", "lif3"),          # a DelayDense stream
    ("intfire_dense", 7, 2, "layers.1/vth", "layers.1"),         # the unrolled integer neuron's threshold
    ("host_partition", 6, 2, "host1/bn.to.n3/gain", "bn.to.n3"),  # what a host sends to the chip
    ("silif_csilif", 5, 3, "layers.1/a_im", "layers.1"),         # CSiLIF's rotation (real <-> imaginary coupling)
])
def test_corruption_fails_verification_naming_the_population(tmp_path, factory, seed, batch, key, population):
    from spikec.targets.lava import verify_lava
    c = compile_fixture(factory, seed=seed, batch=batch)
    assert c.report["target"]["bit_exact"]
    out, x = _write(tmp_path, c)

    def bump(a):
        if key.endswith("weights"):   # a weight from a presynaptic neuron that fires a lot
            col = int(np.argmax(np.abs(a).sum(0)))
            row = int(np.argmax(np.abs(a[:, col])))
            a[row, col] = -a[row, col] if a[row, col] else 64
            return a
        return a * 2 if key.endswith("gain") else a + 7
    _corrupt(out, key, bump)
    bad = verify_lava(out, c.graph, x, None)
    assert not bad["bit_exact"] and not bad["equivalent"]
    assert bad["first_divergent_layer"]["population"] == population, bad["first_mismatches"][:2]
    assert key in bad["arrays_differing_from_lowering"]


def test_verify_rereads_a_written_host_and_sub_step_network(tmp_path):
    from spikec.targets.lava import load, verify_lava
    c = compile_fixture("intfire_conv_pool", seed=2)   # test_max_pooling_as_or_layers_over_unrolled_spikes's
    out, x = _write(tmp_path, c)
    ok = verify_lava(out, c.graph, x, None)
    assert ok["equivalent"] and ok["bit_exact"] and ok["spikes_compared"] == c.report["target"]["spikes_compared"]
    model = load(out)                         # the deployment, usable from Python without Lava
    y = model(x)
    assert y.shape == (x.shape[0], 3, 5) and y.max() <= 2     # the unrolled integer neuron's count (D = 2)
    report = json.loads((out / "report.json").read_text())
    assert report["target"]["schedule"]["lava_steps_per_physical_step"] == 3


@pytest.mark.parametrize("factory,passes,node,why", [
    ("with_graded_maxpool", "none", "layers.2.0", "a max, not an OR"),
])   # (a product of two spike tensors maps now: AND neurons, tests/targets/lava/test_sdna_sdt_lava.py)
def test_refusals_name_the_node(factory, passes, node, why):
    from spikec.ir.errors import SpikecError
    with pytest.raises(SpikecError) as e:
        compile_fixture(factory, batch=1, passes=passes)
    assert why in str(e.value) and (not node or repr(node) in str(e.value))


def test_a_failing_lava_process_raises_instead_of_hanging():
    """Lava waits forever when a ProcessModel raises; spikec's models finish the step, log, and run_lava raises."""
    from spikec.ir.errors import IRError
    from spikec.targets.lava.simulate import run_lava
    net = {"inputs": [{"name": "input", "ir_shape": [3], "lava_shape": [3], "num_message_bits": 0}],
           "processes": [{"name": "host0", "type": "Host", "start": 0, "latency": 0, "period": 1, "emit": 1,
                          "nodes": [], "host_ops": [], "in_ports": [{"node": "input", "ir_shape": [3]}],
                          "out_ports": [{"node": "q", "ir_shape": [3]}],
                          "spec": {"nodes": [{"kind": "quant", "name": "q", "inputs": ["missing"], "gain": "g",
                                              "bits": 0}], "outputs": ["q"], "in_ir_shapes": [[3]]}}],
           "connections": [{"src": "input", "port": "s_out", "dst": "host0", "dst_port": "in0"}],
           "recorded": [{"name": "q", "proc": "host0", "port": "out0", "ir_node": "q", "start": 0, "substeps": 1,
                         "ir_shape": [3], "what": "host"}],
           "period": 1, "max_start": 0, "max_emit": 1}
    with pytest.raises(IRError, match="KeyError: 'missing'"):
        run_lava(net, {"g": np.float64(2.0)}, {"input": np.ones((4, 2, 3), np.int64)})
