"""SEW-ResNet-18 in SpikingJelly style (examples/sew_resnet/model.py) compiled by ``spikec.compile``: the same
model class at a small size (3x32x32, T = 2, B = 1), proved equivalent, its neurons firing (a proof over silent
neurons proves nothing). The ImageNet size (3x224x224, T = 4, B = 2) is measured in ``benchmarks/bench_compile_scale.py
--model sew_resnet18``."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("spikingjelly.activation_based.neuron",
                    reason="SpikingJelly is an optional extra (pip install --no-deps spikingjelly loguru)")

import spikec  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "examples" / "sew_resnet" / "model.py"


def _module():
    spec = importlib.util.spec_from_file_location("sew_resnet_model", MODEL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sew():
    return _module()


@pytest.fixture(scope="module")
def compiled(sew):
    return spikec.compile(sew.small(), batch=1, targets="none", probes=False)


def test_resnet18_layout_has_the_published_parameter_count(sew):
    model = sew.SEWResNet18()
    assert sum(p.numel() for p in model.parameters()) == 11_689_512  # torchvision's resnet18, BN included
    assert model.input_shape == (3, 224, 224) and model.steps == 4


def test_small_compiles_equivalent(compiled):
    r = compiled.report
    assert r["equivalent"] is True
    assert r["frontend"]["stepping"] == "multistep"
    assert r["frontend"]["equivalent"] and r["final"]["equivalent"]
    assert r["final"]["spike_mismatches"] == 0 and r["final"]["spikes_compared"] > 0
    assert all(p["spike_mismatches"] == 0 for p in r["passes"])
    assert r["input"]["steps"] == 2 and r["input"]["batch"] == 1 and r["input"]["shape"] == [3, 32, 32]


def test_every_if_neuron_is_compiled_and_fires(compiled):
    r = compiled.report
    rates = r["firing_rates"]
    # stem + 2 per block x 8 blocks + 3 downsample neurons
    assert len(rates) == 1 + 16 + 3
    assert all(0.05 < v["rate"] < 0.95 for v in rates.values()), rates
    assert not [w for w in r["warnings"] if "silent" in str(w).lower() or "vacu" in str(w).lower()]
    ops = [n.op for n in compiled.graph.nodes]
    assert ops.count("lif") == 20 and ops.count("add") >= 8  # IFNode -> lif; the ADD connect function


def test_bn_folded_into_the_convolutions(compiled):
    assert "fold_batchnorm" in [p["name"] for p in compiled.report["passes"]]
    assert not [n for n in compiled.graph.nodes if n.op == "batchnorm"]
