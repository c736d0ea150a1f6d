"""Norse's recurrent LIF (spikec.frontend.norse_recurrent): LIFRecurrentCell stepped with (x, state) and LIFRecurrent
called once, spikes and every state leaf bit-exact against Norse in float64, against its float32 run wherever the
float64 membrane is not within float32 rounding of the threshold; compiled to ONNX in the step convention
(forward(x, state) -> (y, state)) and multi-step; refused by Lava and NIR by name."""
import copy
import itertools

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import assert_busy, assert_returns_exact, convert_one, run_converted, run_steps
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run

nt = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
import spikec.frontend.norse  # noqa: E402,F401  (registers the converters)

T, N_IN, N = 16, 6, 12
DTS = (1e-3, 2.5e-3)
KINDS = ("scalar", "per_neuron", "float64")


def params(kind, **extra):
    """LIFParameters; v_leak stays a float32 scalar (Norse's initial state is torch.full(v_leak, float32))."""
    base = dict(tau_syn_inv=200.0, tau_mem_inv=100.0, v_th=0.3, v_reset=-0.1)
    if kind != "scalar":
        dtype = torch.float32 if kind == "per_neuron" else torch.float64
        base = {k: v * torch.linspace(0.7, 1.3, N, dtype=dtype) for k, v in base.items()}
    return nt.LIFParameters(**base, v_leak=torch.tensor(0.125), **extra)


def inputs(seed, steps=T, scale=3.0):
    return np.random.default_rng(seed).normal(0.5, scale, size=(steps, 3, N_IN))


def cell(kind="scalar", dt=2e-3, seed=0, **kw):
    torch.manual_seed(seed)
    return nt.LIFRecurrentCell(N_IN, N, params(kind), dt=dt, **kw)


@pytest.mark.parametrize("kind,dt,autapses", list(itertools.product(KINDS, DTS, (False, True))))
def test_cell_is_bit_exact(kind, dt, autapses):
    """z and every leaf of LIFState(z, v, i), stepped from state=None, on three seeds each."""
    for seed in range(3):
        module = cell(kind, dt, seed, autapses=autapses)
        x = inputs(seed)
        ctx, returned = convert_one(module, (N_IN,), "step")
        z, state = returned
        assert isinstance(state, nt.LIFState) and state.z == z and None not in state
        got = assert_returns_exact(ctx, returned, x, run_steps(copy.deepcopy(module).double(), x))
        assert_busy(got[z])
    assert (np.diag(module.recurrent_weights.detach().numpy()) != 0).any() == autapses


@pytest.mark.parametrize("kind,record", list(itertools.product(KINDS, (False, True))))
def test_multistep_is_bit_exact(kind, record):
    torch.manual_seed(3)
    module = nt.LIFRecurrent(N_IN, N, params(kind), dt=2e-3, record_states=record)
    x = inputs(4)
    ctx, (z, state) = convert_one(module, (N_IN,), "multistep")
    with torch.no_grad():
        want_z, want_state = copy.deepcopy(module).double()(torch.from_numpy(x))
    if record:
        got = assert_returns_exact(ctx, (z, state), x, (want_z, want_state))
    else:  # the final state is one step: no node holds it
        assert state == nt.LIFState(None, None, None)
        got = assert_returns_exact(ctx, z, x, want_z)
    assert_busy(got[z])


def _agree_until_close(got, want, margins, tol):
    """Per neuron, the steps before its float64 margin first comes within ``tol``: the spikes there agree (after
    that a float32 rounding may flip one and, through the recurrence, every later step). Returns the share."""
    close = (margins <= tol).any(2, keepdims=True)  # the recurrence couples the neurons of a sample
    first = np.where(close.any(0), close.argmax(0), len(margins))
    before = np.arange(len(margins))[:, None, None] < first[None]
    before = np.broadcast_to(before, got.shape)
    assert np.array_equal(got[before], want[before])
    return before.mean()


@pytest.mark.parametrize("kind", ("scalar", "per_neuron"))
def test_float32_cell_matches_where_rounding_cannot_decide(kind):
    """Norse's own float32 run against spikec's float64 one: identical spikes on every step of a sample before any
    of its neurons' float64 membranes comes within 1e-4 of the threshold; the share compared is reported."""
    shares, closest = [], []
    for seed in range(4):
        module = cell(kind, 2e-3, seed)
        x = inputs(20 + seed)
        ctx, (z, _) = convert_one(module, (N_IN,), "step")
        graph, _ = run_converted(ctx, [z], x)
        trace = run(graph, x)
        want32, _ = run_steps(module, x.astype(np.float32))
        shares.append(_agree_until_close(trace.values[z], want32, trace.margins[z], 1e-4))
        closest.append(float(trace.margins[z].min()))
    print(f"{kind}: compared {np.mean(shares):.1%} of steps; closest float64 margin {min(closest):.2e}")
    assert np.mean(shares) > 0.3


def _dyadic(module, seed):
    """Weights on a 1/64 grid: the MatMul of ONNX then sums 0/1 and small-integer inputs exactly in any order."""
    torch.manual_seed(seed)
    for w in (module.input_weights, module.recurrent_weights):
        with torch.no_grad():
            w.copy_(torch.round(w * 64) / 64)
    return module


class StepNet(nn.Module):
    """Norse's documented step convention: forward(x, state) -> (y, state), the cell called as cell(x, state)."""

    def __init__(self):
        super().__init__()
        self.cell = _dyadic(cell("per_neuron", 2e-3, 5), 5)
        self.out = nn.Linear(N, 3)

    def forward(self, x, state=None):
        z, state = self.cell(x, state)
        return self.out(z), state


def spikes(seed, steps=12):
    return (np.random.default_rng(seed).random((steps, 4, N_IN)) < 0.5).astype(np.float64) * 3


def test_step_convention_compiles_to_onnx():
    import spikec
    c = spikec.compile(StepNet(), spikes(6), stepping="step", targets=("onnx",))
    assert c.equivalent, c.targets
    assert c.targets["onnx"]["streaming"]["equivalent"] is True
    assert "lif_recurrent_norse" in {n.op for n in c.graph.nodes}


def test_multistep_compiles_to_onnx_and_lava_nir_refuses_by_name():
    """ONNX exact; Lava bit-exact (input Dense, LIF population, recurrent Dense loop); NIR refuses it by name."""
    import spikec
    model = _Multi()
    c = spikec.compile(model, spikes(8), targets=("onnx",))
    assert c.equivalent, c.targets
    lava = spikec.compile(model, spikes(8), targets=("lava",))
    assert lava.equivalent and lava.targets["lava"]["bit_exact"] is True, lava.targets["lava"]
    refused = spikec.compile(model, spikes(8), targets=("nir",))
    info = refused.targets["nir"]
    assert not refused.equivalent and info["refused"], info
    assert "lif_recurrent_norse" in info["reason"] and "'rec'" in info["reason"]


class _Multi(nn.Module):
    def __init__(self):
        super().__init__()
        self.rec = _dyadic(nt.LIFRecurrent(N_IN, N, params("scalar"), dt=2e-3), 7)
        self.out = nn.Linear(N, 3)

    def forward(self, x):
        z, _ = self.rec(x)
        return self.out(z)


def test_refusals():
    with pytest.raises(UnsupportedOp, match="adjoint"):
        convert_one(nt.LIFRecurrentCell(N_IN, N, nt.LIFParameters(method="adjoint")), (N_IN,), "step")
    with pytest.raises(UnsupportedOp, match="float32 value"):
        convert_one(nt.LIFRecurrentCell(N_IN, N, nt.LIFParameters(v_leak=torch.tensor(0.1, dtype=torch.float64))),
                    (N_IN,), "step")
    with pytest.raises(UnsupportedOp, match="--stepping"):
        convert_one(cell(), (N_IN,), "multistep")
    with pytest.raises(UnsupportedOp, match="input_size"):
        convert_one(cell(), (N_IN + 1,), "step")
    with pytest.raises(UnsupportedOp, match="no exact converter for the recurrent Norse neuron LIFExRecurrentCell"):
        convert_one(nt.LIFExRecurrentCell(N_IN, N), (N_IN,), "step")


def test_a_state_from_another_module_is_refused_with_a_remedy():
    """Only the step's own state argument (None at trace time: spikec carries the state) may reach a cell."""
    from spikec.frontend import trace
    from spikec.frontend.stepping import Stepped

    class Chained(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = cell(seed=1), nt.LIFRecurrentCell(N, N, params("scalar"))

        def forward(self, x, state=None):
            z, s = self.a(x, state)
            return self.b(z, s)
    with pytest.raises(UnsupportedOp, match="passed to a module") as e:
        trace(Stepped(Chained()), input_shape=(N_IN,), input_kind="real")
    assert "forward(x, state=None)" in e.value.remedy
