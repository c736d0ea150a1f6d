"""snnTorch's Lapicque through spikec.frontend.snntorch: every parameterization (beta; R and C; beta with R or C;
a time_step) and every reset, bit-exact against the module in float64, and against its float32 run wherever the
float64 run is not within float32 rounding of the threshold; compiled end to end to ONNX (and Lava), refused
by NIR by name."""
import copy
import itertools

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import HIDDEN, N_IN, assert_busy, convert_one, run_converted
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend.snntorch import SnnTorchMultiStep

snntorch = pytest.importorskip("snntorch", reason="snnTorch is an optional extra")

STEPS, RESETS = 16, ("subtract", "zero", "none")
PARAMS = {
    "beta": dict(beta=0.7, threshold=0.3),
    "R_C": dict(R=2.0, C=3.0, threshold=torch.linspace(0.3, 1.2, HIDDEN)),
    "beta_R": dict(beta=0.8, R=2.0, threshold=0.5),
    "beta_C": dict(beta=0.85, C=0.5, threshold=torch.tensor(0.3, dtype=torch.float64)),  # float32 r * θ rounds θ
    "R_C_time_step": dict(R=2.0, C=3.0, time_step=0.5, threshold=0.4),
}
CALLS = ("explicit", "hidden", "hidden_output")
CASES = [(*case, CALLS[i % 3]) for i, case in enumerate(itertools.product(RESETS, PARAMS))]


def lapicque(reset, params, call="explicit", **extra):
    return snntorch.Lapicque(reset_mechanism=reset, init_hidden=call != "explicit", output=call == "hidden_output",
                             **PARAMS[params], **extra)


def inputs(seed, shape=(HIDDEN,)):
    return np.random.default_rng(seed).normal(0.4, 2.0, size=(STEPS, 3, *shape))


def step_module(module, x, dtype=torch.float64):
    """The module stepped over ``x`` from rest in ``dtype``, returning (spikes, mem) stacked over T."""
    module = copy.deepcopy(module).to(dtype)
    module.reset_mem()
    spikes, mems, mem = [], [], torch.zeros(x.shape[1:], dtype=dtype)
    with torch.no_grad():
        for x_t in torch.from_numpy(x).to(dtype):
            out = module(x_t) if module.init_hidden else module(x_t, mem)
            spk, mem = (out, module.mem) if not isinstance(out, tuple) else out
            spikes.append(spk.double().numpy())
            mems.append(mem.double().numpy())
    return np.stack(spikes), np.stack(mems)


@pytest.mark.parametrize("reset,params,call", CASES)
def test_lapicque_is_bit_exact_in_float64(reset, params, call):
    """Spikes and mem (when the call returns it) equal the float64 module's, step by step, on three seeds."""
    module = lapicque(reset, params, call)
    for seed in range(3):
        x = inputs(seed)
        ctx, returned = convert_one(module, (HIDDEN,), "step")
        names = returned if isinstance(returned, tuple) else (returned,)
        assert len(names) == (1 if call == "hidden" else 2)
        graph, got = run_converted(ctx, names, x)
        want = step_module(module, x)
        for g, w in zip(got, want):
            assert np.array_equal(g, w), np.abs(g - w).max()
        assert_busy(got[0])
    spike_node = graph.node("neuron")
    assert spike_node.op == ("synaptic_snntorch" if reset == "zero" else "lif_snntorch")
    assert spike_node.attrs["reset_delay"] is True


def _agree_until_close(got, want, margins, tol):
    """Per neuron, the steps up to the first whose float64 margin is within ``tol`` of the threshold (from there a
    float32 rounding may flip a spike and the trajectories part): the spikes there must agree. Returns the share
    of steps compared."""
    close = margins <= tol
    first = np.where(close.any(0), close.argmax(0), len(margins))  # [B, N]: first close step, or T
    before = np.arange(len(margins))[:, None, None] < first[None]
    assert np.array_equal(got[before], want[before])
    return before.mean()


@pytest.mark.parametrize("reset,params", list(itertools.product(RESETS, PARAMS)))
def test_lapicque_float32_module_matches_where_rounding_cannot_decide(reset, params):
    """snnTorch's own float32 run against spikec's float64 one: the same spikes at every step before a neuron's
    float64 membrane comes within 1e-4 of its threshold (float32's rounding of the gain, decay and membrane is far
    below that over 16 steps of O(1) values); the share so compared is reported."""
    module, shares, closest = lapicque(reset, params), [], []
    for seed in range(4):
        x = inputs(10 + seed)
        ctx, (spikes, _) = convert_one(module, (HIDDEN,), "step")
        graph, _ = run_converted(ctx, [spikes], x)
        trace = run(graph, x)
        want32, _ = step_module(module, x, torch.float32)
        margins = trace.margins[spikes]
        shares.append(_agree_until_close(trace.values[spikes], want32, margins, 1e-4))
        closest.append(float(margins.min()))
    print(f"{reset}/{params}: compared {np.mean(shares):.1%} of steps; closest float64 margin {min(closest):.2e}")
    assert np.mean(shares) > 0.5


def test_lapicque_multistep_compiles_to_onnx_and_lava():
    """A Linear-Lapicque-Linear network, multi-step through SnnTorchMultiStep: ONNX (unrolled and streaming) and
    Lava both prove it (Lapicque is lif_snntorch / synaptic_snntorch, which Lava lowers); NIR refuses it by name."""
    import spikec
    torch.manual_seed(0)
    for reset in ("subtract", "zero"):
        model = nn.Sequential(nn.Linear(N_IN, HIDDEN), SnnTorchMultiStep(lapicque(reset, "R_C")),
                              nn.Linear(HIDDEN, 4))
        x = (np.random.default_rng(1).random((12, 4, N_IN)) < 0.5).astype(np.float64)
        c = spikec.compile(model, x, targets=("onnx",))
        assert c.equivalent, c.targets
        assert c.targets["onnx"]["streaming"]["equivalent"] is True
        assert {n.op for n in c.graph.nodes} >= {"scale", "synaptic_snntorch" if reset == "zero" else "lif_snntorch"}
    lava = spikec.compile(model, x, targets=("lava",))
    assert lava.equivalent and lava.targets["lava"]["bit_exact"], lava.targets
    nir = spikec.compile(model, x, targets=("nir",))
    assert not nir.equivalent and nir.targets["nir"]["refused"]
    assert "synaptic_snntorch, module '1'" in nir.targets["nir"]["reason"]


def test_lapicque_in_a_step_model_compiles_to_onnx():
    """The step convention (init_hidden=True, forward(x) called once per step) end to end."""
    import spikec

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.lif = nn.Linear(N_IN, HIDDEN), lapicque("subtract", "beta_C", "hidden")
            self.out = nn.Linear(HIDDEN, 4)

        def forward(self, x):
            return self.out(self.lif(self.fc(x)))
    torch.manual_seed(2)
    x = (np.random.default_rng(2).random((10, 3, N_IN)) < 0.5).astype(np.float64)
    c = spikec.compile(Net(), x, stepping="step", targets=("onnx",))
    assert c.equivalent, c.targets


def test_lapicque_refusals():
    module = lapicque("subtract", "R_C")
    module.R = torch.full((HIDDEN,), 2.0)  # snnTorch's constructor takes none, but a buffer can be replaced
    with pytest.raises(UnsupportedOp, match="R has shape"):
        convert_one(module, (HIDDEN,), "step")

    class Mine(snntorch.Lapicque):
        pass
    with pytest.raises(UnsupportedOp, match="not snntorch.Lapicque"):
        convert_one(Mine(beta=0.9), (HIDDEN,), "step")
    with pytest.raises(UnsupportedOp, match="state_quant"):
        convert_one(snntorch.Lapicque(beta=0.9, state_quant=lambda m: m), (HIDDEN,), "step")
    with pytest.raises(UnsupportedOp, match="--stepping"):
        convert_one(lapicque("zero", "beta"), (HIDDEN,), "multistep")


def test_lapicque_in_a_tutorial_loop_compiles_to_onnx():
    """snnTorch's tutorial form, ``spk, mem = lif(fc(x[t]), mem)`` in forward's own loop (--stepping auto: loop)."""
    import spikec

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.lif = nn.Linear(N_IN, HIDDEN), lapicque("zero", "R_C")
            self.out = nn.Linear(HIDDEN, 4)

        def forward(self, x):
            mem, rec = self.lif.init_lapicque(), []
            for t in range(x.shape[0]):
                spk, mem = self.lif(self.fc(x[t]), mem)
                rec.append(self.out(spk))
            return torch.stack(rec)
    torch.manual_seed(3)
    c = spikec.compile(Loop(), (np.random.default_rng(3).random((10, 3, N_IN)) < 0.5) * 1.0, targets=("onnx",))
    assert c.equivalent, c.targets
