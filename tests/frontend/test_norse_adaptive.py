"""Norse's adaptive neurons (spikec.frontend.norse_adaptive): LIFAdEx and LSNN, feed-forward and recurrent, cells
stepped with (x, state) and multi-step modules called once; spikes and every state leaf bit-exact against Norse in
float64, against its float32 run wherever the float64 run is not within float32 rounding of the threshold;
compiled to ONNX (unrolled and streaming); refused by Lava and NIR by name."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import assert_busy, assert_returns_exact, convert_one, run_converted, run_steps
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run

nt = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
import spikec.frontend.norse  # noqa: E402,F401  (registers the converters)

T, N_IN, N = 16, 6, 10
ADEX = ("LIFAdExCell", "LIFAdEx", "LIFAdExRecurrentCell", "LIFAdExRecurrent")
LSNN = ("LSNNCell", "LSNN", "LSNNRecurrentCell", "LSNNRecurrent")


def params(cls, kind):
    """Parameters that make the neurons busy; ``per_neuron`` spreads each over the N neurons (float32), v_leak
    only where the module's initial state allows it (LIFAdExCell: v = p.v_leak; others torch.full(v_leak))."""
    adex = cls in ADEX
    base = dict(tau_mem_inv=100.0, tau_syn_inv=200.0, v_th=0.3, v_reset=-0.1)
    base.update(dict(tau_ada_inv=50.0, adaptation_current=4.0, adaptation_spike=0.02, delta_T=0.5) if adex else
                dict(tau_adapt_inv=50.0, beta=0.2))
    spread = {k: torch.tensor(v) * (torch.linspace(0.7, 1.3, N) if kind == "per_neuron" else 1) for k, v in
              base.items()}
    if cls in ("LSNN", "LSNNRecurrent"):  # b starts at torch.full(v_th)
        spread["v_th"] = torch.tensor(base["v_th"])
    v_leak = torch.linspace(-0.1, 0.1, N) if kind == "per_neuron" and cls == "LIFAdExCell" else torch.tensor(0.05)
    return (nt.LIFAdExParameters if adex else nt.LSNNParameters)(**spread, v_leak=v_leak)


def build(cls, kind="scalar", seed=0, record=False):
    torch.manual_seed(seed)
    module_cls, p = getattr(nt, cls), params(cls, kind)
    kw = {"record_states": record} if not cls.endswith("Cell") else {}
    return module_cls(N_IN, N, p, dt=2e-3, **kw) if "Recurrent" in cls else module_cls(p, dt=2e-3, **kw)


def inputs(seed, shape):
    return np.random.default_rng(seed).normal(4.0, 20.0, size=(T, 3, *shape))


def shape_of(cls):
    return (N_IN,) if "Recurrent" in cls else (N,)


def reference(module, x):
    double = copy.deepcopy(module).double()
    if type(module).__name__.endswith("Cell"):
        return run_steps(double, x)
    with torch.no_grad():
        return double(torch.from_numpy(x))


CASES = [(c, k) for c in ADEX + LSNN for k in ("scalar", "per_neuron")]


@pytest.mark.parametrize("cls,kind", CASES)
def test_is_bit_exact(cls, kind):
    """z and every state leaf (a multi-step module with record_states; without, its spikes), three seeds each."""
    for seed in range(3):
        record = seed == 1
        module = build(cls, kind, seed, record)
        x = inputs(seed, shape_of(cls))
        ctx, (z, state) = convert_one(module, shape_of(cls), "step" if cls.endswith("Cell") else "multistep")
        want = reference(module, x)
        if cls.endswith("Cell") or record:
            assert None not in state
            got = assert_returns_exact(ctx, (z, state), x, want)
        else:
            assert set(state) == {None}
            got = assert_returns_exact(ctx, z, x, want[0])
        assert_busy(got[z])


def test_adex_cell_first_exponential_is_norses_own():
    """LIFAdExCell starts from v = p.v_leak (float32): its first exponential is float32's, not float64's."""
    module = build("LIFAdExCell")
    ctx, _ = convert_one(module, (N,), "step")
    rest = ctx.nodes[-1].params["dv_exp_rest"]
    p = module.p
    assert rest == float(p.delta_T * torch.exp((p.v_leak - p.v_th) / p.delta_T))
    double = p.delta_T.double() * torch.exp((p.v_leak.double() - p.v_th.double()) / p.delta_T.double())
    assert rest != float(double)  # without it the first step would differ
    assert "dv_exp_rest" not in convert_one(build("LIFAdEx"), (N,), "multistep")[0].nodes[-1].params


def _agree_until_close(got, want, margins, tol):
    """Per sample, the steps before any neuron's float64 margin comes within ``tol`` (then a float32 rounding may
    flip a spike, which adaptation and recurrence carry on): the spikes there agree. Returns the share."""
    close = (margins <= tol).any(2, keepdims=True)
    first = np.where(close.any(0), close.argmax(0), len(margins))
    before = np.broadcast_to(np.arange(len(margins))[:, None, None] < first[None], got.shape)
    assert np.array_equal(got[before], want[before])
    return before.mean()


@pytest.mark.parametrize("cls", ("LIFAdExCell", "LIFAdExRecurrentCell", "LSNNCell", "LSNNRecurrentCell"))
def test_float32_cell_matches_where_rounding_cannot_decide(cls):
    shares, closest = [], []
    for seed in range(4):
        module = build(cls, "per_neuron", seed)
        x = inputs(30 + seed, shape_of(cls))
        ctx, (z, _) = convert_one(module, shape_of(cls), "step")
        graph, _ = run_converted(ctx, [z], x)
        trace = run(graph, x)
        want32, _ = run_steps(module, x.astype(np.float32))
        shares.append(_agree_until_close(trace.values[z], want32, trace.margins[z], 1e-4))
        closest.append(float(trace.margins[z].min()))
    print(f"{cls}: compared {np.mean(shares):.1%} of steps; closest float64 margin {min(closest):.2e}")
    assert np.mean(shares) > 0.3


def dyadic(model, seed):
    """Weights on a 1/16 grid and 0/2 inputs: every MatMul sum is exact in any order."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-4, 12, p.shape) / 16)
    return model


class StepNet(nn.Module):
    """Norse's step convention: forward(x, state) -> (y, state)."""

    def __init__(self, cls):
        super().__init__()
        self.fc, self.cell, self.out = nn.Linear(N_IN, shape_of(cls)[0]), build(cls, "per_neuron"), nn.Linear(N, 3)

    def forward(self, x, state=None):
        z, state = self.cell(self.fc(x), state)
        return self.out(z), state


def spikes(seed):
    return (np.random.default_rng(seed).random((12, 4, N_IN)) < 0.5).astype(np.float64) * 2


@pytest.mark.parametrize("cls", ADEX + LSNN)
def test_compiles_to_onnx(cls):
    import spikec
    if cls.endswith("Cell"):
        model, stepping = dyadic(StepNet(cls), 1), "step"
    else:
        model, stepping = dyadic(nt.SequentialState(nn.Linear(N_IN, shape_of(cls)[0]), build(cls),
                                                    nn.Linear(N, 3)), 1), "multistep"
    c = spikec.compile(model, spikes(2), stepping=stepping, targets=("onnx",))
    assert c.equivalent, c.targets
    assert c.targets["onnx"]["streaming"]["equivalent"] is True


@pytest.mark.parametrize("cls", ("LIFAdExCell", "LSNNRecurrentCell"))
def test_lava_and_nir_refuse_by_name(cls):
    import spikec
    op = "lif_adex_norse" if cls in ADEX else "lsnn_norse"
    for target in ("lava", "nir"):
        c = spikec.compile(dyadic(StepNet(cls), 1), spikes(3), stepping="step", targets=(target,))
        info = c.targets[target]
        assert not c.equivalent and info["refused"] and f"({op}" in info["reason"] and "'cell'" in info["reason"]


def test_refusals():
    with pytest.raises(UnsupportedOp, match="adjoint"):
        convert_one(nt.LSNNCell(adjoint=True), (N,), "step")
    with pytest.raises(UnsupportedOp, match="torch.full"):
        convert_one(nt.LSNN(nt.LSNNParameters(v_leak=torch.zeros(N))), (N,), "multistep")
    with pytest.raises(UnsupportedOp, match=r"torch.full\(v_th\)"):
        convert_one(nt.LSNNRecurrent(N_IN, N, nt.LSNNParameters(v_th=torch.ones(N))), (N_IN,), "multistep")
    with pytest.raises(UnsupportedOp, match="--stepping"):
        convert_one(build("LIFAdExCell"), (N,), "multistep")
    with pytest.raises(UnsupportedOp, match="subclasses"):
        convert_one(nt.LIFAdExRefracCell(), (N,), "step") if issubclass(nt.LIFAdExRefracCell, nt.LIFAdExCell) else \
            convert_one(type("Mine", (nt.LSNNCell,), {})(), (N,), "step")


def test_a_cell_in_forwards_own_loop_compiles_to_onnx():
    """``z, state = cell(x[t], state)`` from ``state = None`` in forward's own loop (--stepping auto: loop)."""
    import spikec

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell, self.out = build("LSNNRecurrentCell", "per_neuron"), nn.Linear(N, 3)

        def forward(self, x):
            state, rec = None, []
            for t in range(x.shape[0]):
                z, state = self.cell(x[t], state)
                rec.append(self.out(z))
            return torch.stack(rec)
    c = spikec.compile(dyadic(Loop(), 4), spikes(4), targets=("onnx",))
    assert c.equivalent, c.targets
