"""The Lava target's quantization self-checks catch the faults bit-exactness cannot see.

Lava and the integer reference run the same integers, so a quantizer or lowering fault they share passes the
bit-for-bit comparison. Each fault is injected by monkeypatching the quantizer or the emitter -- (a) weights
truncated instead of rounded, (b) a dense ``weight_exp`` one too high (every read-out doubled), (c) a population
started one Lava step late -- and the self-check must fail naming the layer; the unmodified digits demo passes.
Quantization and the checks need no Lava; one test runs Lava to show a shared fault stays bit-exact.
"""
from pathlib import Path

import numpy as np
import pytest

import spikec.targets.lava as lava_target
from spikec.core.interpreter import run
from spikec.targets.lava import _int_inputs, assemble, deploy, fixed_point, lava_available
from spikec.targets.lava.ops import with_readouts
from spikec.targets.lava.selfcheck import check_readouts, run_checks

HERE = Path(__file__).resolve().parent
DIGITS = HERE.parents[2] / "examples" / "digits"


@pytest.fixture(scope="module")
def digits():
    """The digits demo's deployed float graph, its verification inputs and the float run (no Lava)."""
    from spikec.app.driver import CompileOptions, compile_model
    c = compile_model(CompileOptions(model=f"{DIGITS / 'model.py'}:small", weights=str(DIGITS / "checkpoint.pt"),
                                     inputs=str(DIGITS / "inputs.npz"), target="none"))
    x = c.io["input"][:, :8]
    return c.graph, x, run(c.graph, x)


def checks_of(graph, x, reference, options=None):
    q, net, arrays = deploy(graph, x, options)
    trace = run(with_readouts(q.graph), _int_inputs(q.graph, x), integer=True)
    return run_checks(graph, q.graph, net, arrays, trace, reference), q, trace


def test_the_digits_demo_passes_every_check(digits):
    c, _, _ = checks_of(*digits)
    assert c["ok"], c["failures"]
    w = c["weight_rounding"]["per_layer"]
    assert set(w) == {"lif1", "lif2", "head.1"}
    assert all(0.4 < v["max_error_lsb"] <= 0.5 for v in w.values())            # round to nearest, and tight
    ro = c["readouts"]["per_layer"]["head.1"]
    assert ro["ok"] and ro["max_error"] <= ro["max_bound"]
    worst = ro["worst_case_bound_same_inputs_lsb"]
    assert ro["max_quantization_error_lsb"] <= ro["max_quantization_bound_lsb"] <= worst
    assert worst == 0.5 * (16 * 4 * 4 + 1)                 # fan-in 256 binary inputs, + the bias
    assert c["schedule"]["processes_checked"] == 3 and not c["schedule"]["mismatched"]


class _Truncating:
    """numpy, except that ``round`` truncates toward zero: the quantizer's fault (a)."""

    def __getattr__(self, name):
        return getattr(np, name)

    round = staticmethod(np.trunc)


def test_truncated_weights_fail_the_rounding_check(digits, monkeypatch):
    monkeypatch.setattr(fixed_point, "np", _Truncating())
    c, _, _ = checks_of(*digits)
    assert not c["ok"] and not c["weight_rounding"]["ok"]
    bad = [k for k, v in c["weight_rounding"]["per_layer"].items() if not v["ok"]]
    assert bad and all(0.5 < c["weight_rounding"]["per_layer"][k]["max_error_lsb"] <= 1 for k in bad)   # truncated
    assert any(f.startswith(f"layer {bad[0]!r}: synapse") and "round to nearest" in f for f in c["failures"])


def _doubled_dense_emit(emit):
    def patched(self, node):
        if node.op == "lava_dense":   # the quantizer's fault (b): weight_exp one too high, every sum doubled
            node = node.with_(attrs=dict(node.attrs, weight_exp=int(node.attrs["weight_exp"]) + 1))
        return emit(self, node)
    return patched


def test_a_doubling_weight_exp_fails_the_weight_and_read_out_checks(digits, monkeypatch):
    monkeypatch.setattr(assemble._Assembly, "emit", _doubled_dense_emit(assemble._Assembly.emit))
    c, _, _ = checks_of(*digits)
    assert not c["ok"]
    assert not c["weight_rounding"]["per_layer"]["head.1"]["ok"]
    assert c["weight_rounding"]["per_layer"]["lif1"]["ok"] and c["weight_rounding"]["per_layer"]["lif2"]["ok"]
    ro = c["readouts"]["per_layer"]["head.1"]
    assert not ro["ok"] and ro["max_error"] > 2 * ro["max_bound"]
    assert any(f.startswith("layer 'head.1': value") for f in c["failures"])


def test_a_doubled_read_out_alone_fails_the_read_out_check(digits):
    graph, x, reference = digits
    c, q, trace = checks_of(graph, x, reference)
    from spikec.targets.lava.selfcheck import _layers
    layers, weights = _layers(graph, q.graph)
    trace.values["head.1"] = trace.values["head.1"] * 2
    r = check_readouts(layers, weights, q.graph, trace, reference)
    assert not r["ok"] and r["failures"][0].startswith("layer 'head.1'")
    assert "LSB off, bound" in r["failures"][0]


def test_a_late_population_fails_the_schedule_check(digits, monkeypatch):
    lower = lava_target.lower

    def late(q):   # the emitter's fault (c): lif2 and everything after it one Lava step later, consistently
        net, arrays = lower(q)
        names = [p["name"] for p in net["processes"]]
        shifted = set()
        for p in net["processes"][names.index("lif2"):]:
            if "start" in p:
                p["start"] += 1
                p["latency"] += 1
                shifted.add(p["name"])
        for r in net["recorded"]:
            r["start"] += r["name"] in shifted
        return net, arrays

    monkeypatch.setattr(lava_target, "lower", late)
    c, _, _ = checks_of(*digits)
    assert not c["ok"] and not c["schedule"]["ok"]
    assert c["schedule"]["mismatched"] == [{"population": "lif2", "start": 3, "implied": 2, "recorded_at": 3}]
    assert c["failures"] == ["population 'lif2' starts at Lava step 3 (recorded from 3); its producers imply 2: "
                             "1 Lava step(s) late"]
    assert c["weight_rounding"]["ok"] and c["readouts"]["ok"]     # the fault is the schedule's alone


@pytest.mark.skipif(lava_available() is not None, reason=f"Lava does not import here: {lava_available()}")
def test_a_shared_fault_is_bit_exact_but_not_equivalent(monkeypatch):
    """Through the compiler with Lava: the truncating quantizer still gives a bit-exact Lava run (Lava and the
    reference share the fault), and the self-check is what makes the target fail."""
    from spikec.app.driver import CompileOptions, compile_model
    monkeypatch.setattr(fixed_point, "np", _Truncating())
    c = compile_model(CompileOptions(model=f"{HERE / 'models.py'}:dense_hard_excitatory", target="lava", batch=2,
                                     seed=2))
    t = c.report["target"]
    assert t["bit_exact"] and not t["quantization_checks"]["ok"] and not c.report["equivalent"]
    assert "self-checks: FAILED: layer" in t["summary"]


@pytest.mark.skipif(lava_available() is not None, reason=f"Lava does not import here: {lava_available()}")
def test_verify_reruns_the_checks_on_the_written_deployment(tmp_path):
    from spikec.app.driver import CompileOptions, compile_model, write_outdir
    from spikec.targets.lava import verify_lava
    c = compile_model(CompileOptions(model=f"{HERE / 'models.py'}:dense_hard_excitatory", target="lava", batch=2,
                                     seed=2))
    assert c.report["target"]["quantization_checks"]["ok"] and c.report["equivalent"]
    out = write_outdir(tmp_path / "out", c)
    x = np.load(out / "io.npz")["input"]
    v = verify_lava(out, c.graph, x, run(c.graph, x))
    assert v["equivalent"] and v["quantization_checks"]["ok"]
    assert v["quantization_checks"]["weight_rounding"]["per_layer"].keys() == {"layers.1", "layers.3"}
