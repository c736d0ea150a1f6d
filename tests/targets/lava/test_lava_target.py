"""The Lava target end to end: compiled in Lava's fixed-point simulator and compared bit for bit.

Seeded random dense and conv networks (hard and soft reset, per-channel thresholds, leak, bias,
T up to 32, mixed-sign, single-sign and odd weights, non-square maps, pools folded), a hand-built
integer network exercising Lava's own arithmetic (du offset, integrator, bias exponent), the
digits demo through the CLI, and a mutation test: one corrupted weight in the written network
must fail verification and name the layer. Lava is slow: networks are small.
"""
import json
import shutil
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


@pytest.mark.parametrize("factory,seed,steps", [("dense_soft", 1, None), ("dense_hard_excitatory", 2, None),
                                                ("conv_pools", 4, 7)])
def test_random_networks_are_bit_exact_in_lava(factory, seed, steps):
    c = compile_fixture(factory, seed=seed, steps=steps)
    t = c.report["target"]
    assert t["name"] == "lava"
    assert t["bit_exact"], t["first_mismatches"]
    assert c.report["equivalent"]
    assert t["spikes_compared"] > 0 and t["states_compared"] > 0
    assert t["steps_compared"] == (steps or c.report["input"]["steps"])
    assert not t["overflow"]
    # the comparison is not vacuous: there is spiking activity in every population
    assert all(v.get("fixed_rate", 1) > 0 for v in t["float_vs_fixed"]["per_layer"].values())
    # latencies grow by one per synapse process along the chain
    lat = [p["latency"] for p in t["processes"] if p["type"] in ("LIF", "SpikecLIF", "Readout", "LIFReadout")]
    assert lat == sorted(lat) and lat[0] == 1


def test_both_neuron_processes_and_traps_in_one_compile():
    t = compile_fixture("conv_mixed", seed=5).report["target"]
    assert t["bit_exact"], t["first_mismatches"]
    assert t["spikes_compared"] == 12 * 3 * (6 * 9 * 6 + 8 * 5 * 2) and t["values_compared"] == 12 * 3 * 4
    kinds = {p["type"] for p in t["processes"]}
    assert {"LIF", "SpikecLIF", "Conv", "Dense", "LIFReadout"} <= kinds   # the read-out: Lava's LIF
    layers = t["quantization"]["layers"]
    assert layers["layers.3"]["reset"] == "subtract" and layers["layers.3"]["process"] == "SpikecLIF"
    assert layers["layers.1"]["process"] == "LIF"
    assert t["float_vs_fixed"]["approximate"] is True
    assert t["resources"]["neurocores_estimate"] >= 3


def _hand_network():
    """An integer network Lava's LIF runs as is: du = 0 (current carried, 1/4096 leak), du = -1 (integrator),
    dv = 0 (IF), a bias with exponent, odd weights in 2w form, an excitatory layer, soft and hard reset."""
    from spikec.ir.graph import Graph, Node, TensorType
    rng = np.random.default_rng(7)
    w1 = 2 * rng.integers(-128, 128, (6, 10))
    w2 = rng.integers(0, 256, (4, 6))
    nodes = [Node("input", "input", (), TensorType((10,), "binary")),
             Node("d1", "lava_dense", ("input",), TensorType((6,)), {"weight_exp": -1, "num_message_bits": 0},
                  {"weight": w1}),
             Node("p1", "lava_lif", ("d1",), TensorType((6,), "binary"),
                  {"reset": "zero", "output": "spikes", "process": "LIF"},
                  {"du": np.int64(0), "dv": np.int64(0), "vth": np.int64(300),
                   "bias_mant": rng.integers(-200, 200, 6), "bias_exp": np.full(6, 3)}),
             Node("d2", "lava_dense", ("p1",), TensorType((4,)), {"weight_exp": 0, "num_message_bits": 0},
                  {"weight": w2}),
             Node("p2", "lava_lif", ("d2",), TensorType((4,), "binary"),
                  {"reset": "subtract", "output": "spikes", "process": "SpikecLIF"},
                  {"du": np.array([-1, 0, 4095, 100]), "dv": np.array([0, 7, 410, 4095]), "vth": np.int64(900),
                   "bias_mant": np.array([5, -7, 0, 11]), "bias_exp": np.array([0, 1, 2, 7])})]
    return Graph(tuple(nodes), ("p2",))


def test_lava_arithmetic_reproduced_by_the_integer_reference():
    from spikec.core.interpreter import run
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.lower import lower
    from spikec.targets.lava.ops import with_readouts
    from spikec.targets.lava.simulate import run_lava
    q = _hand_network()
    x = {"input": (np.random.default_rng(8).random((25, 2, 10)) < 0.4).astype(np.int64)}
    trace = run(with_readouts(q), x, integer=True)
    net, arrays = lower(q)
    r = compare(net, trace, run_lava(net, arrays, x), 25)
    assert r["bit_exact"], r["first_mismatches"]
    assert trace.values["p1"].sum() > 0 and trace.values["p2"].sum() > 0


def test_demo_compiles_for_lava_bit_exact(tmp_path):
    from click.testing import CliRunner
    from spikec.app.cli import main
    digits = REPO / "examples" / "digits"
    out = tmp_path / "demo"
    res = CliRunner().invoke(main, ["compile", f"{digits / 'model.py'}:small", "--weights",
                                    str(digits / "checkpoint.pt"), "--inputs", str(digits / "inputs.npz"),
                                    "--target", "lava", "-o", str(out)])
    assert res.exit_code == 0, res.output
    t = json.loads((out / "report.json").read_text())["target"]
    samples = json.loads((out / "report.json").read_text())["input"]["batch"]    # 16 digits + the probes
    assert samples > 16 and t["bit_exact"] and t["spikes_compared"] == 8 * samples * (8 * 8 * 8 + 16 * 4 * 4)
    assert t["float_vs_fixed"]["outputs"]["head.1"]["class_agreement"] >= 0.9
    assert (out / "lava" / "network.json").exists() and (out / "lava" / "quantized" / "graph.json").exists()
    kinds = {p["name"]: p["type"] for p in t["processes"]}   # make demo: every process chip-ready
    assert kinds["head.1"] == "LIFReadout" and kinds["lif1"] == "LIF" and kinds["lif1.reset"] == "Sparse"
    assert (t["chip_readiness"]["chip_ready"], t["chip_readiness"]["processes"]) == (9, 9)
    m = t["membrane_in_u"]   # lif1's subtract reset with the membrane in u, against its carry-free form
    assert m["populations"] == ["lif1"] and 0.99 <= m["per_population"]["lif1"]["spike_agreement"] <= 1
    assert m["carry"]["lif1"]["nonzero"] > 0 and "the membrane in u" in t["summary"]
    assert t["standard_readouts"]["head.1"]["within"] and t["standard_readouts"]["head.1"]["within_bound"]
    import spikec                            # the deployment, usable from Python without Lava
    model = spikec.load(out)
    with np.load(out / "io.npz") as z:
        x, y = z["input"], z["output"]
    logits = model(x, dequantize=True)
    assert logits.shape == y.shape and (logits.sum(0).argmax(-1) == y.sum(0).argmax(-1)).mean() >= 0.9
    assert np.array_equal(model(x)[:, :5], model(x[:, :5]))       # integer outputs, batched


def test_corrupted_weight_fails_verification_naming_the_layer(tmp_path):
    from spikec.app.driver import write_outdir
    from spikec.targets.lava import verify_lava
    c = compile_fixture("dense_soft", seed=9)
    assert c.report["target"]["bit_exact"]
    out = write_outdir(tmp_path / "out", c)
    x = np.load(out / "io.npz")["input"]
    ok = verify_lava(out, c.graph, x, None)
    assert ok["equivalent"] and ok["bit_exact"]
    params = out / "lava" / "params.npz"
    with np.load(params) as z:
        arrays = {k: z[k] for k in z.files}
    from spikec.core.interpreter import run
    from spikec.targets.lava import load_deployed
    q = load_deployed(out)[0]
    fired = run(q, x.astype(np.int64), integer=True).values["layers.1"].sum((0, 1))
    w = arrays["layers.2.0/weights"]             # the Dense feeding population layers.3
    col = int(np.argmax(fired))                  # a presynaptic neuron that spikes (a silent one's weight is
    row = int(np.argmax(np.abs(w[:, col])))      # only caught by the lowering check, not by simulation)
    w[row, col] = -w[row, col] if w[row, col] else 64
    np.savez(params, **arrays)
    bad = verify_lava(out, c.graph, x, None)
    assert not bad["equivalent"] and not bad["bit_exact"]
    assert bad["first_divergent_layer"] == {"population": "layers.3", "synapse": "layers.2.0"}
    assert bad["arrays_differing_from_lowering"] == ["layers.2.0/weights"]
    assert bad["first_mismatches"][0]["node"] == "layers.3"


def test_netx_export_loads_and_runs_bit_exact(tmp_path):
    import h5py
    from spikec.app.driver import write_outdir
    from spikec.targets.lava import load_deployed, netx
    c = compile_fixture("conv_hard", seed=6, batch=2)
    t = c.report["target"]
    assert t["bit_exact"]
    nx = t["netx"]
    assert nx["exportable"] and nx["verification"]["loaded"], nx
    v = nx["verification"]
    print("\nnetx loader:", v["loader_note"])
    assert v["bit_exact"] and v["spikes_compared"] > 0 and v["states_compared"] > 0 and not v["overflow"]
    out = write_outdir(tmp_path / "out", c)
    assert (out / "model.net").exists()
    q = load_deployed(out)[0]
    x = np.load(out / "io.npz")["input"].astype(np.int64)
    assert netx.verify(q, out / "model.net", x, samples=1)["bit_exact"]
    corrupt = tmp_path / "corrupt.net"                 # netx keeps model.net open: corrupt a copy
    shutil.copy(out / "model.net", corrupt)
    with h5py.File(corrupt, "r+") as f:                # one conv weight of the first layer
        w = f["layer/1/weight"][()]
        i = np.unravel_index(np.abs(w).argmax(), w.shape)
        w[i] = -w[i]
        f["layer/1/weight"][...] = w
    bad = netx.verify(q, corrupt, x, samples=1)
    assert not bad["bit_exact"] and bad["first_mismatches"][0]["node"] == "layers.1"


def test_netx_runs_an_image_input_its_first_dense_reads_flattened():
    """The netx check sends each step flattened in the IR's (C, H, W) order, the order of model.net's weights."""
    t = compile_fixture("dense_flat_image", seed=3, batch=2).report["target"]
    v = t["netx"]["verification"]
    assert t["bit_exact"] and v["loaded"] and v["bit_exact"] and v["spikes_compared"] > 0, t["netx"]


def test_netx_refusal_names_the_nodes():
    t = compile_fixture("dense_soft", seed=1).report["target"]
    blocked = {b["node"] for b in t["netx"]["blocking_nodes"]}
    assert {"layers.1", "layers.4.0"} <= blocked and not t["netx"]["exportable"]
