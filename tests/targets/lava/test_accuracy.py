"""Digits demo: test-set accuracy of the float source vs the quantized Loihi 2 deployment.

The deployment is evaluated with its integer reference (bit-exact with Lava's fixed-point simulation,
which ``test_lava_target.py`` checks on the verification inputs), so the whole test set runs fast
and without Lava. Calibration uses only the 16 verification samples shipped in ``inputs.npz``.
"""
import importlib.util
from pathlib import Path

import numpy as np

from spikec.app.driver import CompileOptions, compile_model
from spikec.core.interpreter import run
from spikec.targets.lava import deploy

DIGITS = Path(__file__).resolve().parents[3] / "examples" / "digits"


def test_digits_float_vs_fixed_accuracy():
    spec = importlib.util.spec_from_file_location("digits_model", DIGITS / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    compiled = compile_model(CompileOptions(model=f"{DIGITS / 'model.py'}:small",
                                            weights=str(DIGITS / "checkpoint.pt"),
                                            inputs=str(DIGITS / "inputs.npz"), target="none"))
    q, _, _ = deploy(compiled.graph, compiled.io["input"])
    _, _, x_te, y_te = mod.load_split()
    spikes = mod.encode(x_te, 8, seed=0).numpy().astype(np.float64)
    labels = y_te.numpy()
    out_f = run(compiled.graph, spikes, record="outputs").values[compiled.graph.outputs[0]]
    out_q = run(q.graph, spikes.astype(np.int64), integer=True, record="outputs").values[q.graph.outputs[0]]
    acc_f = float((out_f.mean(0).argmax(1) == labels).mean())
    acc_q = float((out_q.mean(0).argmax(1) == labels).mean())
    agree = float((out_f.mean(0).argmax(1) == out_q.mean(0).argmax(1)).mean())
    print(f"\ndigits test set ({len(labels)} samples, T=8): float {acc_f:.4f}, fixed {acc_q:.4f}, "
          f"same class {agree:.4f}")
    assert acc_f > 0.8
    assert acc_q >= acc_f - 0.03 and agree >= 0.9


RIPE = Path(__file__).resolve().parents[3] / "examples" / "ripe"


def test_ripe_float_vs_fixed_accuracy():
    """The RIPE example on Loihi 2 fixed point: CSiLIF/SiLIF with 12-bit decays, DS-MPA and BNTT on host
    partitions (integer reference, which test_lava_mapping checks bit for bit against Lava)."""
    spec = importlib.util.spec_from_file_location("ripe_data", RIPE / "data.py")
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    compiled = compile_model(CompileOptions(model=f"{RIPE / 'model.py'}:small", weights=str(RIPE / "checkpoint.pt"),
                                            inputs=str(RIPE / "inputs.npz"), target="none"))
    q, _, _ = deploy(compiled.graph, compiled.io["input"])
    x, y = data.make_events(200, 8, (32, 32), seed=1)      # the test split's generator (data.split: seed 1)
    x, labels = x.numpy().astype(np.float64), y.numpy()
    out_f = run(compiled.graph, x, record="outputs").values[compiled.graph.outputs[0]]
    out_q = run(q.graph, x.astype(np.int64), integer=True, record="outputs").values[q.graph.outputs[0]]
    acc_f = float((out_f.mean(0).argmax(1) == labels).mean())
    acc_q = float((out_q.mean(0).argmax(1) == labels).mean())
    agree = float((out_f.mean(0).argmax(1) == out_q.mean(0).argmax(1)).mean())
    print(f"\nripe test samples ({len(labels)}, T=8): float {acc_f:.4f}, fixed {acc_q:.4f}, same class {agree:.4f}")
    assert acc_f > 0.8 and acc_q >= acc_f - 0.05 and agree >= 0.9
