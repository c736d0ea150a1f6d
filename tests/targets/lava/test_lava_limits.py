"""Values the Lava target's integers cannot hold are refused by node, before any cast, with no numpy warning.

Inputs of ``1e300 * binary`` used to be cast to int64 garbage (a RuntimeWarning on stderr) that the integer
reference and Lava then agreed on: "equivalent true". Inputs (verification and calibration) must be finite,
integral spike counts below 2**23 (Lava's 24-bit payloads and states); parameters (weights, biases,
thresholds, resets, decays) exact integers of the integer reference (below 2**53). Every check runs with
warnings turned into errors and numpy's floating-point errors raising.
"""
import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from spikec.ir.errors import BadInput
from spikec.frontend import trace
from spikec.targets.lava import _int_inputs, deploy
from spikec.targets.lava.limits import describe, int_inputs, to_int
from spikec.targets.lava.quantize import quantize

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


@pytest.fixture(autouse=True)
def strict(request):
    """Any warning is an error, and numpy raises on overflow / invalid casts instead of warning."""
    if request.node.name.startswith("test_cli"):   # a subprocess: its stderr is checked instead
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            yield


def _models():
    spec = importlib.util.spec_from_file_location("lava_limit_models", HERE / "models.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _graph(model, batch=2, seed=0):
    x = (np.random.default_rng(seed).random((model.steps, batch, *model.input_shape)) < 0.3).astype(np.float64)
    return trace(model.eval(), model.input_shape, input_kind="binary"), x


def test_huge_integral_inputs_are_refused_naming_the_node_and_the_bits():
    g, x = _graph(_models().dense_soft())
    huge = 1e300 * x                       # integral, finite, far beyond int64
    for call in (lambda: deploy(g, huge), lambda: _int_inputs(g, huge), lambda: quantize(g, huge)):
        with pytest.raises(BadInput) as e:
            call()
        msg = str(e.value)
        assert e.value.where == "node 'layers.0.0'"           # the synapse reading the input
        assert "values up to 1e+300 need 998 bits" in msg and "24 bits" in msg and "53-bit" in msg
        assert "2**23" in e.value.remedy


def test_calibration_inputs_are_checked_too():
    g, x = _graph(_models().dense_soft())
    with pytest.raises(BadInput, match="values up to 1.68e\\+07 need 26 bits"):
        deploy(g, x, {"calibration": x * 2 ** 24})


@pytest.mark.parametrize("value,why", [(np.inf, "not finite"), (np.nan, "not finite"), (2.0 ** 23, "need 25 bits"),
                                       (0.5, "not integral")])
def test_each_kind_of_bad_input_value(value, why):
    g, x = _graph(_models().dense_soft())
    bad = x.copy()
    bad[3, 1, 7] = value
    with pytest.raises(BadInput, match=why) as e:
        int_inputs(g, bad)
    assert e.value.where == "node 'layers.0.0'"


def test_the_largest_payload_lava_holds_is_accepted():
    g, x = _graph(_models().dense_soft())
    ok = int_inputs(g, x * (2 ** 23 - 1))["input"]
    assert ok.dtype == np.int64 and ok.max() == 2 ** 23 - 1


def test_huge_parameters_are_refused_by_population():
    model = _models().dense_soft().double()
    with torch.no_grad():
        next(m for m in model.layers[0].modules() if isinstance(m, torch.nn.Linear)).bias[3] = 1e300
    g, x = _graph(model)
    with pytest.raises(BadInput) as e:
        quantize(g, x)
    assert e.value.where == "node 'layers.1'" and "neuron biases (64 s b): values up to" in str(e.value)
    assert "53-bit exact integers" in str(e.value)


def test_a_vanishing_threshold_is_refused_not_cast():
    model = _models().dense_hard_excitatory().double()
    model.layers[3].threshold.fill_(1e-310)   # subnormal: VTH / theta overflows to inf
    g, x = _graph(model)
    with pytest.raises(BadInput, match="threshold is too small") as e:
        quantize(g, x)
    assert e.value.where == "node 'layers.3'"


def test_to_int_and_describe():
    assert to_int(np.array([1.0, -(2.0 ** 52)]), node="n", what="w").tolist() == [1, -(2 ** 52)]
    with pytest.raises(BadInput, match="node 'n'.*w: values up to 9.01e\\+15 need 55 bits"):
        to_int(np.array([2.0 ** 53]), node="n", what="w")
    assert describe([np.nan, 1]).startswith("1 value(s) are not finite")


def test_cli_exits_2_with_no_warning_on_stderr(tmp_path):
    digits = REPO / "examples" / "digits"
    with np.load(digits / "inputs.npz") as z:
        x = z["input"][:, :4].astype(np.float64)
    np.savez(tmp_path / "huge.npz", input=1e300 * x)
    res = subprocess.run([sys.executable, "-m", "spikec.app.cli", "compile", f"{digits / 'model.py'}:small",
                          "--weights", str(digits / "checkpoint.pt"), "--inputs", str(tmp_path / "huge.npz"),
                          "--target", "lava", "-o", str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "node 'conv1.1'" in res.stderr and "need 998 bits" in res.stderr
    assert "Warning" not in res.stderr and "equivalent true" not in res.stdout
