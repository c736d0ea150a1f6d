"""Precision honesty (spikec/app/precision.py): the source model run in its own float32 against the float64
reference spikec proves against, on snnTorch and plain torch models."""
import copy
import json
import random

import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snc
from spikec.app.precision import REL_TOL, flip_margins, source_dtype, source_precision
from spikec.core.checker import run_torch
from spikec.core.interpreter import run
from spikec.frontend import trace
from spikec.frontend.snntorch import SnnTorchMultiStep

N = 4


@pytest.fixture
def snntorch():
    return pytest.importorskip("snntorch", reason="snnTorch is an optional extra")


def precision(model, x, **kw):
    reference, _ = run_torch(model, x)
    return source_precision(model, x, reference, **kw)


def leaky(snntorch, beta=0.9, threshold=1.0):
    return nn.Sequential(SnnTorchMultiStep(snntorch.Leaky(beta=beta, threshold=threshold)))


def arithmetic_tie():
    """An input x (a float32) and threshold with 0.9 x + x rounding below the threshold in float32 only."""
    b32 = np.float32(0.9)
    for k in range(1, 200):
        x = np.float32(k / 157)
        m32, m64 = b32 * x + x, np.float64(b32) * np.float64(x) + np.float64(x)
        if np.float64(m32) < m64:
            return float(x), float(m32), m64
    raise AssertionError("no float32 rounding below float64 found")


def test_snntorch_spikes_flip_where_float32_rounds_the_membrane_below_the_threshold(snntorch):
    x_val, threshold, m64 = arithmetic_tie()
    model = leaky(snntorch, threshold=threshold)  # every value float32-representable: only the sum rounds
    x = np.zeros((3, 2, N))
    x[:2, 0, 1:3] = x_val  # sample 0, neurons 1 and 2 reach 0.9 x + x at step 1
    x[:, 1, :] = 0.25       # sample 1: far from the threshold
    r = precision(model, x)
    assert r["dtype"] == "float32" and r["output_dtypes"] == ["float32"]
    (out,) = r["outputs"]
    assert out["spike"] and out["values"] == x.size
    assert out["disagreements"] == 2 and r["disagreements"] == 2
    assert r["agreement"] == pytest.approx(1 - 2 / x.size) == out["agreement"]
    assert [(f["step"], f["index"], f["float64"], f["source"]) for f in out["first"]] == \
        [(1, [0, 1], 1.0, 0.0), (1, [0, 2], 1.0, 0.0)]
    assert out["max_abs_diff"] == 1.0 and out["tolerance"] == 0.0
    assert "2 spikes flip" in r["explanation"] and "float32" in r["explanation"]
    json.dumps(r, allow_nan=False)  # a report value


def test_input_rounding_flips_spikes_too_and_listing_stops_at_five(snntorch):
    model = leaky(snntorch)
    x = np.zeros((2, 3, N))
    x[0] = 1 + 1e-8  # above the threshold in float64, exactly 1.0 (not above it) in float32
    r = precision(model, x)
    (out,) = r["outputs"]
    assert out["disagreements"] == 3 * N and len(out["first"]) == 5
    assert all(f["step"] == 0 and f["float64"] == 1.0 and f["source"] == 0.0 for f in out["first"])


def test_snntorch_agrees_where_no_membrane_is_near_a_threshold(snntorch):
    model = leaky(snntorch, beta=0.5, threshold=1.0)
    rng = np.random.default_rng(0)
    x = rng.choice([0.0, 0.25, 2.0], size=(8, 4, N))  # dyadic: every sum exact in float32
    r = precision(model, x)
    (out,) = r["outputs"]
    assert out["spike"] and 0 < run_torch(model, x)[0][0].mean() < 1
    assert r["disagreements"] == 0 and r["agreement"] == 1.0 and out["first"] == []
    assert "agrees with that float64 run on all" in r["explanation"]


def test_a_plain_torch_model_with_real_outputs_agrees_within_the_stated_tolerance():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(N, 3), nn.Tanh())
    x = np.random.default_rng(1).normal(size=(5, 2, N))
    r = precision(model, x)
    (out,) = r["outputs"]
    assert not out["spike"] and r["rel_tol"] == REL_TOL[torch.float32] == 1e-5
    assert out["disagreements"] == 0
    assert 0 < out["max_abs_diff"] <= out["tolerance"]  # float32 differs, within the tolerance
    assert out["tolerance"] == pytest.approx(1e-5 * np.abs(run_torch(model, x)[0][0]).max())
    assert "rel_tol" in r["tolerance"]


class Cancel(nn.Module):
    """(x + 1e4) - 1e4: float32 keeps about 3 decimals of x."""

    def __init__(self):
        super().__init__()
        self.register_buffer("big", torch.tensor(1e4))

    def forward(self, x):
        return (x + self.big) - self.big


def test_real_values_beyond_the_tolerance_are_disagreements():
    x = np.random.default_rng(2).uniform(0.1, 1.0, size=(3, 2, N))
    r = precision(Cancel(), x)
    (out,) = r["outputs"]
    assert not out["spike"] and out["disagreements"] > 0 and out["max_abs_diff"] > out["tolerance"]
    f = out["first"][0]
    assert abs(f["float64"] - f["source"]) > out["tolerance"]
    assert "real value" in r["explanation"]


def test_a_float64_model_says_so():
    torch.manual_seed(0)
    model = nn.Linear(N, 2).double()
    r = precision(model, np.ones((2, 2, N)))
    assert r["dtype"] == "float64" and r["rel_tol"] == REL_TOL[torch.float64]
    assert r["disagreements"] == 0 and "float64" in r["explanation"] and "parameters are float64" in r["explanation"]


def test_every_returned_tensor_is_compared():
    """spikec's LIF with return_membrane returns (spikes, membrane): a spike and a real output."""
    model = snc.LIF(beta=0.5, threshold=1.0, return_membrane=True)
    x = np.zeros((2, 1, N))
    x[0, 0, :2] = 1 - 1e-9  # below the threshold in float64, 1.0 (on it: fires) in float32
    reference = [np.asarray(o) for o in run_torch(model, x)[0]]
    r = source_precision(model, x, reference)
    spikes, membrane = r["outputs"]
    assert (spikes["spike"], membrane["spike"]) == (True, False)
    assert [(f["step"], f["index"], f["float64"], f["source"]) for f in spikes["first"]] == \
        [(0, [0, 0], 0.0, 1.0), (0, [0, 1], 0.0, 1.0)]
    # step 0's membranes agree within the tolerance; at step 1 the float32 one was reset by its flipped spike
    assert [(f["step"], f["index"], f["source"]) for f in membrane["first"]] == [(1, [0, 0], 0.0), (1, [0, 1], 0.0)]
    assert membrane["first"][0]["float64"] == pytest.approx(0.5)
    assert r["values"] == 2 * x.size


def test_run_source_steps_a_single_step_module(snntorch):
    cell = snntorch.Leaky(beta=0.9, threshold=1.0)
    calls = []

    def run_source(model, x):
        calls.append(x.dtype)
        mem, out = torch.zeros_like(x[0]), []
        for x_t in x:
            spk, mem = model(x_t, mem)
            out.append(spk)
        return torch.stack(out)

    x = np.zeros((2, 1, N))
    x[0] = 1 + 1e-8
    reference = [run_source(copy.deepcopy(cell).double(), torch.from_numpy(x)).numpy()]
    calls.clear()
    r = source_precision(cell, x, reference, run_source=run_source)
    assert calls == [torch.float32] and r["outputs"][0]["disagreements"] == N


class Float64Only(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(N, 2)

    def forward(self, x):
        if x.dtype != torch.float64:
            raise TypeError(f"expected a float64 input, got {x.dtype}")
        return self.fc(x)


def test_a_source_run_that_raises_in_float32_is_reported_not_raised():
    model = Float64Only()
    x = np.ones((2, 1, N))
    reference, _ = run_torch(model, x)  # runs in float64
    assert source_precision(model, x, reference) == {
        "dtype": "float32", "error": "TypeError: expected a float64 input, got torch.float32"}


def test_an_output_count_or_shape_mismatch_is_an_error_entry():
    model = nn.Linear(N, 2)
    x = np.ones((2, 1, N))
    reference, _ = run_torch(model, x)
    assert source_precision(model, x, reference + reference)["error"].startswith("ValueError: the float32 run "
                                                                                "returned 1 outputs")
    assert "shape" in source_precision(model, x, [reference[0][:1]])["error"]


class Meddler(nn.Module):
    """Changes torch's default dtype and draws random numbers in forward."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(N, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        torch.set_default_dtype(torch.float64)
        return self.fc(x) + 0 * torch.rand(()) + 0 * np.random.rand() + 0 * random.random()


def test_the_model_and_global_state_are_left_as_they_were(snntorch):
    model = Meddler()
    x = np.ones((2, 1, N))
    reference, _ = run_torch(model, x)
    torch.set_default_dtype(torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    expected = (torch.rand(()), np.random.rand(), random.random())
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    r = source_precision(model, x, reference)
    assert r["disagreements"] == 0 and model.calls == 0
    assert torch.get_default_dtype() == torch.float32
    assert (torch.rand(()), np.random.rand(), random.random()) == expected
    assert all(torch.equal(v, model.state_dict()[k]) and v.dtype == model.state_dict()[k].dtype
               for k, v in before.items())
    lk = leaky(snntorch)
    mem = lk[0].leaky.mem
    precision(lk, np.ones((2, 1, N)))
    assert lk[0].leaky.mem is mem and lk[0].leaky.beta.dtype == torch.float32


def test_source_dtype_is_the_lowest_precision_of_parameters_and_buffers():
    assert source_dtype(nn.Linear(2, 2)) == torch.float32
    assert source_dtype(nn.Linear(2, 2).double()) == torch.float64
    mixed = nn.Sequential(nn.Linear(2, 2).double(), nn.Linear(2, 2).half())
    assert source_dtype(mixed) == torch.float16
    assert source_dtype(nn.ReLU()) == torch.get_default_dtype()


def test_flip_margins_reads_the_float64_margin_of_the_flipped_output_neuron(snntorch):
    x_val, threshold, m64 = arithmetic_tie()
    model = leaky(snntorch, threshold=threshold)
    x = np.zeros((3, 2, N))
    x[:2, 0, 1] = x_val
    x[:, 1, :] = 3.0
    graph = trace(model, input_shape=(N,), input_kind="real")
    r = precision(model, x)
    marked = flip_margins(r, graph, run(graph, x))
    (f,) = marked["outputs"][0]["first"]
    assert "margin" not in r["outputs"][0]["first"][0]  # a copy: the report itself is unchanged
    assert f["margin"] == pytest.approx(m64 - threshold) and 0 < f["margin"] < 1e-7


class Overflow(nn.Module):
    """x * 1e30 * 1e30 / 1e30 / 1e30: x in float64, Inf in float32."""

    def __init__(self):
        super().__init__()
        self.register_buffer("big", torch.tensor(1e30))

    def forward(self, x):
        return x * self.big * self.big / self.big / self.big


def test_non_finite_source_values_are_disagreements_and_stay_json():
    x = np.full((2, 1, N), 0.5)
    x[1] = -0.75
    r = precision(Overflow(), x)
    (out,) = r["outputs"]
    assert out["disagreements"] == x.size and out["non_finite"] == x.size and out["max_abs_diff"] == 0.0
    assert out["first"][0]["source"] == "inf" and out["first"][-1]["source"] == "-inf"
    json.dumps(r, allow_nan=False)
