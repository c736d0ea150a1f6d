"""Chip readiness (``spikec/targets/lava/chip.py``): every process of the report carries ``chip_ready`` and ``why``;
standard Lava processes (LIF, Dense, DelayDense, Conv) are chip-ready, spikec's custom ones CPU-only; the rule's
premise holds in the installed lava-nc (its open processes have CPU models only); the CLI summary has the line."""
import importlib
from pathlib import Path

import pytest

from spikec.targets.lava import chip, lava_available
from spikec.targets.lava.lower import POPULATION_TYPES

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[2] / "examples"
needs_lava = pytest.mark.skipif(lava_available() is not None, reason=f"Lava unavailable: {lava_available()}")
EMITTED = POPULATION_TYPES + ("Conv", "Dense", "DelayDense", "Relay", "Host")   # every type lower.py emits


def test_every_emitted_type_has_a_stated_verdict():
    for typ in EMITTED:
        v = chip.verdict({"name": "p", "type": typ})
        assert (typ in chip.STANDARD) == v["chip_ready"]
        assert typ in chip.STANDARD or typ in chip.CUSTOM, typ
        assert ("no Loihi 2 microcode model" in v["why"]) != v["chip_ready"]
    assert {t for t in EMITTED if chip.verdict({"type": t})["chip_ready"]} == {"LIF", "OR", "AND", "Dense",
                                                                               "DelayDense", "Conv", "LIFReadout"}


def test_a_lif_whose_bias_is_switched_on_says_so():
    v = chip.verdict({"name": "l", "type": "LIF", "bias_on_after_step": 3})
    assert v["chip_ready"] and "after Lava step 3" in v["why"]


def test_readiness_counts_and_line():
    net = {"processes": [{"name": "c", "type": "Conv"}, {"name": "a", "type": "SpikecLIF"},
                         {"name": "d", "type": "Dense"}, {"name": "r", "type": "Readout"}]}
    r = chip.readiness(net)
    assert (r["processes"], r["chip_ready"], r["cpu_only"]) == (4, 2, 2)
    assert chip.line(r).startswith("chip-ready: 2 of 4 processes") and "a (SpikecLIF), r (Readout)" in chip.line(r)
    report = {"processes": [{"name": "c", "type": "Conv", "latency": 1}], "summary": "lava: x"}
    chip.add_to_report(report, net)
    assert report["processes"][0]["chip_ready"] is True and report["processes"][0]["latency"] == 1
    assert report["summary"].splitlines()[-1].strip().startswith("chip-ready: 2 of 4")


def test_a_host_partition_remedy_follows_the_ops_it_runs():
    """A max pool over real values (snnTorch's tutorial conv net pools the conv's current before the neuron) is told
    to pool after the neuron; a host product keeps the products remedy."""
    net = {"processes": [{"name": "h0", "type": "Host", "host_ops": ["maxpool2d"]},
                         {"name": "h1", "type": "Host", "host_ops": ["matmul"]}]}
    by = {b["name"]: b["remedy"] for b in chip.blockers(net)}
    assert "pool after the neuron" in by["h0"] and "OR layer" in by["h0"]
    assert by["h1"] == chip.REMEDY["Host"] and "pool after" not in by["h1"]


@needs_lava
def test_the_standard_classes_exist_and_the_open_package_has_no_loihi2_model():
    for path in set(chip.STANDARD.values()):
        module, cls = path.rsplit(".", 1)
        assert hasattr(importlib.import_module(module), cls), path
    import lava.proc
    root = Path(lava.proc.__path__[0])
    chip_models = [p for p in root.rglob("*.py") if "Loihi2NeuroCore" in p.read_text() or "NeuroCore)" in p.read_text()]
    assert not chip_models, chip_models   # lava-nc 0.10: CPU models only; Loihi 2 models are in lava-loihi


@needs_lava
def test_a_compiled_network_reports_chip_ready_per_process():
    from spikec.app.driver import CompileOptions, compile_model
    c = compile_model(CompileOptions(model=f"{HERE / 'models.py'}:conv_mixed", target="lava", batch=1, seed=5))
    t = c.report["target"]
    assert t["bit_exact"]
    kinds = {p["name"]: (p["type"], p["chip_ready"]) for p in t["processes"]}
    assert all(ok == (typ in ("LIF", "Conv", "Dense", "LIFReadout")) for typ, ok in kinds.values()), kinds
    assert all(p["why"] for p in t["processes"])
    r = t["chip_readiness"]
    assert r["chip_ready"] == sum(ok for _, ok in kinds.values()) and r["cpu_only"] == 1   # SpikecLIF
    assert "chip-ready: " in t["summary"].splitlines()[-1]


@needs_lava
def test_an_exact_source_deployment_reports_chip_ready_too():
    from spikec.app.driver import CompileOptions, compile_model
    c = compile_model(CompileOptions(model=f"{EXAMPLES / 'digits_loihi' / 'model.py'}:small", target="lava",
                                     weights=str(EXAMPLES / "digits_loihi" / "checkpoint.pt"), batch=1, seed=2))
    t = c.report["target"]
    assert t["bit_exact_vs_source"] is True
    assert all("chip_ready" in p and p["why"] for p in t["processes"])
    assert t["chip_readiness"]["processes"] == len(t["processes"])
    assert "chip-ready: " in t["summary"]


def test_neurons_count_the_networks_own_neurons_a_ladder_once():
    from spikec.targets.lava import chip
    net = {"processes": [
        {"name": "a", "type": "LIF", "ir_shape": [8, 4, 4], "ladder": 2},   # 4 channels x 2 copies: 64 neurons
        {"name": "a.reset", "type": "Sparse", "ir_shape": [8, 4, 4], "ladder": 2},
        {"name": "b", "type": "SpikecIntFire", "ir_shape": [10]},
        {"name": "pool", "type": "OR", "ir_shape": [4, 2, 2]},               # a pool, not a neuron of the network
        {"name": "s", "type": "Dense", "ir_shape": [10]}]}
    n = chip.neurons(net)
    assert (n["network"], n["standard"]) == (74, 64) and n["share"] == round(64 / 74, 6)
    assert "64 of 74 neurons, 86.5%" in chip.line(chip.readiness(net))
