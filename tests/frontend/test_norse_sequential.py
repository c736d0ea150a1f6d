"""A Norse SequentialState of multi-step children (nn.Linear, LIF, LI, LIFRecurrent) called once on [T, B, ...]:
its output bit-exact against Norse in float64, the whole model compiled to ONNX (--stepping multistep, and auto)."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import assert_busy, assert_returns_exact, convert_one
from spikec.ir.errors import UnsupportedOp

nt = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
import spikec.frontend.norse  # noqa: E402,F401  (registers the converters)
from spikec.frontend.stepping import StateDropped, adapt  # noqa: E402

T, N_IN, N = 16, 6, 12


def dyadic(model, seed):
    """Weights on a 1/16 grid and dyadic inputs: every Linear sum is exact in any order (torch per [T, B] or
    merged, ONNX's MatMul), so the comparison sees the neurons alone."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-4, 12, p.shape) / 16)
    return model


def feed_forward(seed=0, hidden=False):
    return dyadic(nt.SequentialState(
        nn.Linear(N_IN, N), nt.LIF(nt.LIFParameters(v_th=torch.tensor(0.25), v_leak=torch.tensor(0.0)), dt=1e-2),
        nn.Linear(N, 4), nt.LI(nt.LIParameters(v_leak=torch.tensor(0.0)), dt=1e-2), return_hidden=hidden), seed)


def recurrent(seed=0):
    p = nt.LIFParameters(v_th=torch.tensor(0.25), tau_mem_inv=torch.linspace(50.0, 150.0, N))
    return dyadic(nt.SequentialState(nn.Linear(N_IN, N_IN), nt.LIFRecurrent(N_IN, N, p, dt=1e-2), nn.Linear(N, 4)),
                  seed)


def inputs(seed, steps=T):
    return np.random.default_rng(seed).integers(-4, 16, size=(steps, 3, N_IN)) / 4


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("build", (feed_forward, recurrent))
def test_multistep_sequential_state_is_exact(build, seed):
    model = build(seed)
    x = inputs(seed)
    ctx, (out, states) = convert_one(model, (N_IN,), "multistep")
    assert states[0] is None and states[1] is not None  # the neuron's final state: its leaves are None
    double = copy.deepcopy(model).double()
    with torch.no_grad():
        want, _ = double(torch.from_numpy(x))
        want_spikes, _ = double[1](double[0](torch.from_numpy(x)))
    assert_returns_exact(ctx, out, x, want)
    assert_busy(assert_returns_exact(ctx, "neuron.1", x, want_spikes)["neuron.1"])


def test_return_hidden_returns_every_childs_output():
    model = feed_forward(4, hidden=True)
    x = inputs(4)
    ctx, (hidden, _) = convert_one(model, (N_IN,), "multistep")
    with torch.no_grad():
        want, _ = copy.deepcopy(model).double()(torch.from_numpy(x))
    assert len(hidden) == 4
    assert_returns_exact(ctx, hidden, x, want)


@pytest.mark.parametrize("stepping", ("multistep", "auto"))
@pytest.mark.parametrize("build", (feed_forward, recurrent))
def test_compiles_to_onnx(build, stepping):
    """The bare SequentialState is the model: its (y, state) output is adapted to y (StateDropped)."""
    import spikec
    model = build(5)
    assert isinstance(adapt(model, "multistep"), StateDropped) and adapt(nn.Linear(2, 2), "multistep") is not None
    c = spikec.compile(model, inputs(6, 12), stepping=stepping, targets=("onnx",))
    assert c.equivalent, c.targets


def test_cells_in_a_multistep_sequential_state_are_refused_naming_the_cell():
    model = nt.SequentialState(nn.Linear(N_IN, N), nt.LIFRecurrentCell(N, N))
    with pytest.raises(UnsupportedOp, match="--stepping step") as e:
        convert_one(model, (N_IN,), "multistep")
    assert "neuron.1" in e.value.where and "LIFRecurrentCell" in e.value.where
