"""Norse neurons through spikec.frontend.norse: spikes and every returned state leaf bit-exact against Norse's own
modules in float64 (cells stepped with explicit state from None, multi-step modules called once)."""
import itertools

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import (HIDDEN, N_IN, assert_busy, assert_returns_exact, convert_one, inputs, run_converted,
                                  run_steps)
from spikec.ir.errors import ShapeError, UnsupportedOp
from spikec.ir.graph import Node, TensorType
from spikec.ops import infer_type

nt = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
import spikec.frontend.norse as sn  # noqa: E402  (registers the converters)

T = 16
SHAPE = (HIDDEN,)
DTS = (1e-3, 2.5e-3, 4e-3)
KINDS = ("scalar", "per_neuron", "float64")


def _values(kind, **scalars):
    """Each named parameter as a float (``scalar``: Norse makes float32 0-dim tensors of them), a float32 vector
    spread around it (``per_neuron``), or a float64 vector (``float64``: Norse then rounds dt * tau in float64)."""
    if kind == "scalar":
        return scalars
    dtype = torch.float32 if kind == "per_neuron" else torch.float64
    return {k: v * torch.linspace(0.7, 1.3, HIDDEN, dtype=dtype) + (0.05 if k.startswith("v_") else 0.0)
            for k, v in scalars.items()}


def lif_params(kind, scalar_leak=False, **extra):
    p = _values(kind, tau_syn_inv=200.0, tau_mem_inv=100.0, v_leak=0.1, v_th=1.0, v_reset=-0.2)
    if scalar_leak:  # Norse's multi-step modules start from torch.full(v_leak): a scalar only
        p["v_leak"] = torch.tensor(0.1)
    return {**p, **extra}


def li_params(kind, scalar_leak=False):
    p = _values(kind, tau_syn_inv=200.0, tau_mem_inv=100.0, v_leak=0.1)
    p["v_leak"] = torch.tensor(0.1) if scalar_leak else torch.as_tensor(p["v_leak"])  # LI's state needs a tensor
    return p


# -- cells, step by step ------------------------------------------------------------------------
@pytest.mark.parametrize("kind,dt", list(itertools.product(KINDS, DTS)))
def test_lif_cell_is_exact(kind, dt):
    cell = nt.LIFCell(nt.LIFParameters(**lif_params(kind)), dt=dt)
    x = inputs(1, T, shape=SHAPE)
    ctx, returned = convert_one(cell, SHAPE, "step")
    assert isinstance(returned[1], nt.LIFFeedForwardState) and None not in returned[1]
    got = assert_returns_exact(ctx, returned, x, run_steps(cell, x))
    assert_busy(got[returned[0]])


@pytest.mark.parametrize("method", sn.HEAVISIDE_METHODS)
def test_lif_cell_every_heaviside_method(method):
    cell = nt.LIFCell(nt.LIFParameters(**lif_params("per_neuron"), method=method), dt=2e-3)
    x = inputs(2, T, shape=SHAPE)
    ctx, returned = convert_one(cell, SHAPE, "step")
    assert_busy(assert_returns_exact(ctx, returned, x, run_steps(cell, x))[returned[0]])


@pytest.mark.parametrize("kind,dt,reset", list(itertools.product(KINDS, DTS, ("value", "subtract"))))
def test_lif_box_cell_is_exact(kind, dt, reset):
    from norse.torch.functional.reset import reset_subtract, reset_value
    p = lif_params(kind, reset_method=reset_value if reset == "value" else reset_subtract)
    p.pop("tau_syn_inv")
    p["v_leak"] = torch.as_tensor(p["v_leak"])  # LIFBoxCell keeps p as given; its state clones v_leak
    cell = nt.LIFBoxCell(nt.LIFBoxParameters(**p), dt=dt * 5)
    x = inputs(3, T, scale=1.5, shape=SHAPE)
    ctx, returned = convert_one(cell, SHAPE, "step")
    assert ctx.nodes[-1].attrs["reset"] == reset
    assert_busy(assert_returns_exact(ctx, returned, x, run_steps(cell, x))[returned[0]])


@pytest.mark.parametrize("kind,dt", list(itertools.product(KINDS, DTS)))
def test_li_cell_is_exact(kind, dt):
    cell = nt.LICell(nt.LIParameters(**li_params(kind)), dt=dt)
    x = inputs(4, T, shape=SHAPE)
    ctx, (v, state) = convert_one(cell, SHAPE, "step")
    assert state.v == v and state.i is not None
    got = assert_returns_exact(ctx, (v, state), x, run_steps(cell, x))
    assert (got[v] > 0).any() and (got[v] < 0).any() and not np.array_equal(got[v], got[state.i])


@pytest.mark.parametrize("kind,dt", list(itertools.product(KINDS, DTS)))
def test_li_box_cell_is_exact(kind, dt):
    p = li_params(kind)
    p.pop("tau_syn_inv")
    cell = nt.LIBoxCell(nt.LIBoxParameters(**p), dt=dt)
    x = inputs(5, T, shape=SHAPE)
    ctx, returned = convert_one(cell, SHAPE, "step")
    got = assert_returns_exact(ctx, returned, x, run_steps(cell, x))
    assert len(got) == 1 and np.unique(got[returned[0]]).size > T


def test_lif_cell_per_channel_after_conv():
    """Norse parameters of shape (C, 1, 1) broadcast per channel over [B, C, H, W]: the IR's (C,) vectors."""
    per_channel = {k: torch.as_tensor(v).reshape(-1, 1, 1)[:3] for k, v in lif_params("per_neuron").items()}
    cell = nt.LIFCell(nt.LIFParameters(**per_channel), dt=2e-3)
    x = inputs(6, T, shape=(3, 4, 4))
    ctx, returned = convert_one(cell, (3, 4, 4), "step")
    assert ctx.nodes[-1].params["threshold"].shape == (3,)
    assert_busy(assert_returns_exact(ctx, returned, x, run_steps(cell, x))[returned[0]])


def test_strict_threshold_on_ties():
    """Dyadic inputs and a = 1/2 put v~ exactly on v_th; Norse fires only on v~ - v_th > 0."""
    p = nt.LIFBoxParameters(tau_mem_inv=torch.tensor(0.5), v_leak=torch.tensor(0.0), v_th=torch.tensor(1.0),
                            v_reset=torch.tensor(0.0))
    cell = nt.LIFBoxCell(p, dt=1.0)
    x = np.random.default_rng(7).integers(0, 5, size=(T, 4, 8)) / 2.0
    ctx, (z, state) = convert_one(cell, (8,), "step")
    graph, _ = run_converted(ctx, [z], x)
    from spikec.core.interpreter import run
    margins = run(graph, x).margins[z]
    assert (margins == 0).sum() > 5  # ties happened
    assert_busy(assert_returns_exact(ctx, (z, state), x, run_steps(cell, x))[z])


# -- multi-step modules, called once ---------------------------------------------------------------
@pytest.mark.parametrize("kind,dt,record", list(itertools.product(KINDS, DTS, (False, True))))
def test_lif_is_exact(kind, dt, record):
    module = nt.LIF(nt.LIFParameters(**lif_params(kind, scalar_leak=True)), dt=dt, record_states=record)
    x = inputs(7, T, shape=SHAPE)
    ctx, (z, state) = convert_one(module, SHAPE, "multistep")
    with torch.no_grad():
        want_z, want_state = module(torch.from_numpy(x))
    if record:  # the per-step states are [T, B, ...] sequences: nodes
        got = assert_returns_exact(ctx, (z, state), x, (want_z, want_state))
    else:  # the final state is one step: no node holds it
        assert state == nt.LIFFeedForwardState(None, None)
        got = assert_returns_exact(ctx, z, x, want_z)
    assert_busy(got[z])


@pytest.mark.parametrize("kind,dt,record", list(itertools.product(KINDS, DTS, (False, True))))
def test_li_is_exact(kind, dt, record):
    module = nt.LI(nt.LIParameters(**li_params(kind, scalar_leak=True)), dt=dt, record_states=record)
    x = inputs(8, T, shape=SHAPE)
    ctx, (v, state) = convert_one(module, SHAPE, "multistep")
    with torch.no_grad():
        want = module(torch.from_numpy(x))
    got = assert_returns_exact(ctx, (v, state), x, want if record else (want[0], nt.LIState(None, None)))
    assert (state.v == v) if record else (state == nt.LIState(None, None))
    assert (got[v] > 0).any() and (got[v] < 0).any()


# -- SequentialState -----------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", (False, True))
def test_sequential_state_steps_its_children(hidden):
    """Dyadic weights and inputs: the Linear sums are exact however BLAS orders them ([B, C] per step in torch,
    [T*B, C] in the IR), so the test sees the threading of states alone."""
    torch.manual_seed(0)
    model = nt.SequentialState(nn.Linear(N_IN, HIDDEN), nt.LIFCell(nt.LIFParameters(**lif_params("per_neuron"))),
                               nn.Linear(HIDDEN, 4), nt.LICell(nt.LIParameters(**li_params("scalar"))),
                               return_hidden=hidden).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-4, 12, p.shape) / 16)
    x = np.random.default_rng(9).integers(-4, 16, size=(T, 3, N_IN)) / 8
    ctx, (out, states) = convert_one(model, (N_IN,), "step")
    assert states[0] is None and states[2] is None
    assert isinstance(states[1], nt.LIFFeedForwardState) and isinstance(states[3], nt.LIState)
    assert_returns_exact(ctx, (out, states), x, run_steps(model, x))
    assert_busy(run_converted(ctx, ["neuron.1"], x)[1][0])  # the LIFCell's spikes


# -- the ops' own checks -------------------------------------------------------------------------------
def test_ops_check_their_attributes():
    x = TensorType(SHAPE)
    params = {sn.MEM: np.array(0.1), "v_leak": np.array(0.0), "threshold": np.array(1.0), "v_reset": np.array(0.0)}
    ok = Node("n", "lif_norse", ("x",), x, {"current": False, "reset": "subtract"}, params)
    assert infer_type(ok, [x]) == TensorType(SHAPE, "binary")
    for attrs in ({"current": False, "reset": "subtract", "read": "i"}, {"current": True, "reset": "value"},
                  {"current": False, "reset": "zero"}, {"current": False, "reset": "value", "read": "membrane"}):
        with pytest.raises(ShapeError):
            infer_type(ok.with_(attrs=attrs), [x])


# -- refusals --------------------------------------------------------------------------------------------
def refused(module, shape=SHAPE, stepping="step"):
    with pytest.raises(UnsupportedOp) as e:
        convert_one(module, shape, stepping)
    return str(e.value)


def test_refuses_a_method_without_heaviside_forward():
    assert "method='adjoint'" in refused(nt.LIFCell(nt.LIFParameters(method="adjoint")))


def test_refuses_recurrent_cells_it_has_no_converter_for():
    assert "recurrent Norse neuron LIFRefracRecurrentCell" in refused(nt.LIFRefracRecurrentCell(N_IN, HIDDEN))


def test_refuses_other_norse_neurons_by_name():
    assert "LIFExCell" in refused(nt.LIFExCell())
    assert "LIFRefracCell" in refused(nt.LIFRefracCell())


def test_refuses_parameters_that_vary_within_a_channel():
    cell = nt.LIFCell(nt.LIFParameters(v_th=torch.rand(3, 4, 4) + 0.5))
    assert "one value per channel" in refused(cell, (3, 4, 4))


def test_refuses_lif_with_a_per_neuron_leak():
    assert "torch.full" in refused(nt.LIF(nt.LIFParameters(**lif_params("per_neuron"))), stepping="multistep")


def test_refuses_li_with_a_leak_off_float32():
    module = nt.LI(nt.LIParameters(v_leak=torch.tensor(0.1, dtype=torch.float64)))
    assert "float32" in refused(module, stepping="multistep")


def test_refuses_a_cell_traced_multistep_and_a_sequence_module_traced_step():
    assert "one time step" in refused(nt.LIFCell(), stepping="multistep")
    assert "whole [T, B, ...] sequence" in refused(nt.LI(nt.LIParameters(v_leak=torch.tensor(0.0))))


def test_refuses_sequential_state_of_cells_multistep_naming_the_cell():
    model = nt.SequentialState(nn.Linear(N_IN, HIDDEN), nt.LIFCell())
    why = refused(model, (N_IN,), "multistep")
    assert "neuron.1" in why and "LIFCell" in why and "--stepping step" in why


def test_refuses_subclasses():
    class MyCell(nt.LIFCell):
        pass
    assert "subclasses" in refused(MyCell())


def test_refuses_a_custom_reset_method():
    p = nt.LIFBoxParameters(reset_method=lambda z, v, reset, th: v * (1 - z))
    assert "reset_method" in refused(nt.LIFBoxCell(p))


class _TwoCells(nn.Module):
    """Norse's documented way to step a network of several cells: a list of states, None at the first step."""

    def __init__(self):
        super().__init__()
        self.fc1, self.l1 = nn.Linear(N_IN, HIDDEN), nt.LIFCell()
        self.fc2, self.l2 = nn.Linear(HIDDEN, 4), nt.LIFCell()

    def forward(self, x, state=None):
        if state is None:
            state = [None, None]
        z1, s1 = self.l1(self.fc1(x), state[0])
        z2, s2 = self.l2(self.fc2(z1), state[1])
        return z2, [s1, s2]


def test_a_step_model_unpacking_its_list_of_states_compiles():
    """``if state is None: state = [None, None]`` is traced with the state as the None it starts as, each cell's
    state then carried by its multi-step op; the result equals Norse stepping the model itself."""
    import spikec
    torch.manual_seed(0)
    model = _TwoCells()
    with torch.no_grad():
        model.fc1.weight.mul_(5)
        model.fc2.weight.mul_(5)
    x = inputs(2, 10)
    c = spikec.compile(model, x, stepping="step", targets=("onnx",))
    assert c.equivalent and c.targets["onnx"]["spike_exact"]
    assert [n.op for n in c.graph.nodes].count("lif_norse") == 2
    spikes = c.run(x)
    assert 0 < spikes.mean() < 1  # the output layer fires, and not always
