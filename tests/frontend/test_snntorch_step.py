"""snnTorch's own neurons called one step at a time (stepping "step") through their converters
(spikec.frontend.snntorch): every tensor a call returns (spikes, syn, mem, ...) equals, bit for bit in float64,
what the snnTorch module returns when stepped over T from its reset state."""
import copy
import itertools

import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import HIDDEN, assert_busy, convert_one, run_converted
from spikec.ir.errors import UnsupportedOp
from spikec.frontend.snntorch import SnnTorchMultiStep

snntorch = pytest.importorskip("snntorch", reason="snnTorch is an optional extra")

STEPS, RESETS, DELAYS = 16, ("subtract", "zero", "none"), (True, False)
CALLS = ("explicit", "hidden", "hidden_output")  # init_hidden=False; True; True with output=True
CONV = (2, 5, 5)
STATEFUL_SPK = (snntorch.RLeaky, snntorch.RSynaptic)  # the spikes are a state argument too


def call_kwargs(call):
    return {"init_hidden": call != "explicit", "output": call == "hidden_output"}


def inputs(seed, shape=(HIDDEN,), loc=0.3, scale=2.0):
    return np.random.default_rng(seed).normal(loc, scale, size=(STEPS, 3, *shape))


def step_snntorch(module, x):
    """The module in float64 stepped over ``x [T, B, ...]`` from its reset state, as its users step it: with
    init_hidden=False each call gets back every state the previous call returned. Returns each returned tensor
    stacked over T. snnTorch's float32 spikes cannot enter a float64 nn.Linear/Conv2d recurrence (torch raises),
    so that layer's input is cast to float64, which is exact (the values are 0 and 1)."""
    module = copy.deepcopy(module).double()
    rec = getattr(module, "recurrent", None)
    if isinstance(rec, (nn.Linear, nn.Conv2d)):
        rec.register_forward_pre_hook(lambda _, args: tuple(a.double() for a in args))
    module.reset_mem()
    outs, state = [], ()
    with torch.no_grad():
        for x_t in torch.from_numpy(x):
            out = module(x_t, *state)
            out = out if isinstance(out, tuple) else (out,)
            if not module.init_hidden:
                state = out if isinstance(module, STATEFUL_SPK) else out[1:]
            outs.append(out)
    return [np.stack([o[i].numpy() for o in outs]) for i in range(len(outs[0]))]


def needed(graph, names) -> set:
    """The nodes ``names`` are computed from, themselves included."""
    inputs, seen, todo = {n.name: n.inputs for n in graph.nodes}, set(), list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += inputs[name]
    return seen


def check(module, x, shape=(HIDDEN,)):
    """Convert ``module`` for one step of ``shape``, run the IR on ``x``, compare with snnTorch; returns the
    graph and the spike node's op."""
    ctx, returned = convert_one(module, shape, "step")
    names = returned if isinstance(returned, tuple) else (returned,)
    want = step_snntorch(module, x)
    assert len(names) == len(want) and all(isinstance(n, str) for n in names), names
    graph, got = run_converted(ctx, names, x)
    for name, g, w in zip(names, got, want):
        assert np.array_equal(g, w), (name, np.abs(g - w).max())
    assert_busy(got[0] != 0)
    assert needed(graph, names) == {n.name for n in graph.nodes}  # no node the call does not return or need
    spike_node = next(n for n in graph.nodes if n.name == "neuron")
    return graph, spike_node.op


# -- Leaky ---------------------------------------------------------------------------------------
LEAKY_PARAMS = {
    # a float64 0-dim threshold that float32 cannot hold: snnTorch's float32 r * threshold rounds it
    "scalar": dict(beta=0.8, threshold=torch.tensor(0.3, dtype=torch.float64)),
    "per_channel": dict(beta=torch.linspace(-0.2, 1.3, HIDDEN), threshold=torch.linspace(0.2, 1.2, HIDDEN)),
    "learnable": dict(beta=torch.full((HIDDEN,), 0.9), threshold=torch.tensor(0.5, dtype=torch.float64),
                      learn_beta=True, learn_threshold=True, graded_spikes_factor=0.37,
                      learn_graded_spikes_factor=True),
}
LEAKY_CASES = [(*case, CALLS[i % 3]) for i, case in enumerate(itertools.product(RESETS, DELAYS, LEAKY_PARAMS))]


@pytest.mark.parametrize("reset,delay,params,call", LEAKY_CASES)
def test_leaky(reset, delay, params, call):
    leaky = snntorch.Leaky(reset_mechanism=reset, reset_delay=delay, **LEAKY_PARAMS[params], **call_kwargs(call))
    _, op = check(leaky, inputs(1))
    assert op == ("lif" if reset == "zero" else "lif_snntorch")  # every threshold here is >= 0


@pytest.mark.parametrize("delay", DELAYS)
def test_leaky_zero_reset_negative_threshold(delay):
    """Below 0 the immediate zero reset leaves mem > threshold: snnTorch's delayed reset then acts too."""
    leaky = snntorch.Leaky(beta=0.7, threshold=torch.linspace(-0.4, 0.6, HIDDEN), reset_mechanism="zero",
                           reset_delay=delay)
    _, op = check(leaky, inputs(2))
    assert op == ("lif" if delay else "lif_snntorch")


def test_leaky_per_channel_on_conv_steps():
    leaky = snntorch.Leaky(beta=torch.tensor([0.5, 0.9]).view(2, 1, 1), threshold=torch.tensor([0.4, 0.8]).view(2, 1, 1),
                           reset_delay=False)
    check(leaky, inputs(3, CONV), CONV)


# -- Synaptic ------------------------------------------------------------------------------------
SYNAPTIC_PARAMS = {
    "scalar": dict(alpha=0.6, beta=0.8, threshold=torch.tensor(0.7, dtype=torch.float64)),
    "per_channel": dict(alpha=torch.linspace(0.1, 1.2, HIDDEN), beta=torch.linspace(-0.1, 0.9, HIDDEN),
                        threshold=torch.linspace(0.5, 1.5, HIDDEN), learn_alpha=True, learn_beta=True),
}
SYNAPTIC_CASES = [(*case, CALLS[i % 3]) for i, case in enumerate(itertools.product(RESETS, DELAYS, SYNAPTIC_PARAMS))]


@pytest.mark.parametrize("reset,delay,params,call", SYNAPTIC_CASES)
def test_synaptic(reset, delay, params, call):
    m = snntorch.Synaptic(reset_mechanism=reset, reset_delay=delay, **SYNAPTIC_PARAMS[params], **call_kwargs(call))
    graph, op = check(m, inputs(4, loc=0.0, scale=1.5))
    assert op == ("lif" if reset == "zero" and not delay else "synaptic_snntorch")
    if call != "hidden":
        assert next(n for n in graph.nodes if n.name == "neuron.syn").op == "lif"


def test_synaptic_graded():
    m = snntorch.Synaptic(alpha=0.5, beta=0.9, threshold=1.0)
    m.graded_spikes_factor = torch.tensor(-2.5)
    graph, _ = check(m, inputs(5, loc=0.0, scale=1.5))
    assert [n.op for n in graph.nodes].count("scale") == 1


# -- RLeaky, RSynaptic -----------------------------------------------------------------------------
def recurrence(kind):
    """Constructor arguments and the step shape of each recurrence."""
    if kind == "one_to_one":
        # a float64 V float32 cannot hold: snnTorch's float32 spikes times a 0-dim V round it to float32
        return dict(all_to_all=False, V=torch.tensor(0.45, dtype=torch.float64), learn_recurrent=False), (HIDDEN,)
    if kind == "one_to_one_channel":
        return dict(all_to_all=False, V=torch.linspace(-0.6, 0.6, HIDDEN)), (HIDDEN,)
    if kind == "linear":
        return dict(linear_features=HIDDEN), (HIDDEN,)
    return dict(conv2d_channels=CONV[0], kernel_size=3, learn_recurrent=False), CONV


RECURRENCES = ("one_to_one", "one_to_one_channel", "linear", "conv2d")
RLEAKY_CASES = [(*case, CALLS[i % 3]) for i, case in enumerate(itertools.product(RECURRENCES, RESETS, DELAYS))]


@pytest.mark.parametrize("kind,reset,delay,call", RLEAKY_CASES)
def test_rleaky(kind, reset, delay, call):
    torch.manual_seed(0)
    kwargs, shape = recurrence(kind)
    m = snntorch.RLeaky(beta=0.85, threshold=torch.tensor(0.6, dtype=torch.float64), reset_mechanism=reset,
                        reset_delay=delay, **kwargs, **call_kwargs(call))
    _, op = check(m, inputs(6, shape, loc=0.1), shape)
    assert op == "rleaky_snntorch"


RSYNAPTIC_CASES = [(*case, CALLS[i % 3]) for i, case in enumerate(itertools.product(RECURRENCES, RESETS))]


@pytest.mark.parametrize("kind,reset,call", RSYNAPTIC_CASES)
def test_rsynaptic(kind, reset, call):
    torch.manual_seed(1)
    kwargs, shape = recurrence(kind)
    m = snntorch.RSynaptic(alpha=torch.tensor(0.55, dtype=torch.float64), beta=0.8, threshold=0.9,
                           reset_mechanism=reset, **kwargs, **call_kwargs(call))
    _, op = check(m, inputs(7, shape, loc=0.0, scale=1.5), shape)
    assert op == "synaptic_snntorch"


# -- Alpha ---------------------------------------------------------------------------------------
ALPHA_PARAMS = {
    "scalar": dict(alpha=0.9, beta=0.8, threshold=torch.tensor(0.3, dtype=torch.float64)),
    "per_channel": dict(alpha=torch.linspace(0.7, 0.95, HIDDEN), beta=0.6, threshold=torch.linspace(0.2, 0.6, HIDDEN),
                        learn_beta=True),
}


@pytest.mark.parametrize("reset,params,call", [(*case, CALLS[i % 3]) for i, case in
                                               enumerate(itertools.product(RESETS, ALPHA_PARAMS))])
def test_alpha(reset, params, call):
    m = snntorch.Alpha(reset_mechanism=reset, **ALPHA_PARAMS[params], **call_kwargs(call))
    m.graded_spikes_factor = torch.tensor(0.75) if params == "scalar" else m.graded_spikes_factor
    _, op = check(m, inputs(8, loc=0.5, scale=3.0))
    assert op == "alpha_snntorch"


TIES = {
    "leaky_zero_no_delay": lambda: snntorch.Leaky(beta=0.5, threshold=1.0, reset_mechanism="zero", reset_delay=False),
    "leaky_subtract": lambda: snntorch.Leaky(beta=0.5, threshold=1.0, reset_delay=False),
    "synaptic_zero": lambda: snntorch.Synaptic(alpha=0.5, beta=0.5, threshold=1.0, reset_mechanism="zero"),
    "rleaky": lambda: snntorch.RLeaky(beta=0.5, threshold=1.0, all_to_all=False, V=-0.25),
    "rsynaptic": lambda: snntorch.RSynaptic(alpha=0.25, beta=0.5, threshold=1.0, all_to_all=False, V=0.5),
}


@pytest.mark.parametrize("case", TIES)
def test_strict_threshold_on_ties(case):
    """Dyadic inputs make mem == threshold exactly: snnTorch fires only on mem > threshold."""
    m = TIES[case]()
    x = np.random.default_rng(9).integers(-2, 5, size=(STEPS, 4, HIDDEN)) / 4.0
    check(m, x)
    mem = step_snntorch(m, x)[-1]
    assert (mem == 1.0).sum() > 0  # ties happened (with reset_delay the returned mem is the one fired on)


# -- refusals ------------------------------------------------------------------------------------
def refused(module, match, shape=(HIDDEN,), stepping="step"):
    with pytest.raises(UnsupportedOp, match=match):
        convert_one(module, shape, stepping)


def test_refuses_subclasses():
    refused(snntorch.DeltaLeaky(beta=0.9), "DeltaLeaky is not snntorch.Leaky")


@pytest.mark.filterwarnings("ignore:Inhibition")
def test_refuses_inhibition():
    refused(snntorch.Synaptic(alpha=0.5, beta=0.9, inhibition=True), "winner-take-all")


def test_refuses_state_quant():
    from snntorch.functional import quant
    refused(snntorch.Leaky(beta=0.9, state_quant=quant.state_quant(num_bits=4)), "state_quant")


def test_refuses_a_custom_spike_grad():
    refused(snntorch.RLeaky(beta=0.9, linear_features=HIDDEN, spike_grad=lambda v: (v >= 0).float()),
            "custom spike_grad")


@pytest.mark.parametrize("g", [torch.tensor([0.5]), torch.tensor(0.0), torch.linspace(0.5, 1.0, HIDDEN)])
def test_refuses_a_graded_factor_that_is_not_a_nonzero_scalar(g):
    refused(snntorch.Leaky(beta=0.9, graded_spikes_factor=g), "not a finite non-zero 0-dim scalar")


def test_refuses_a_graded_factor_on_a_recurrence():
    m = snntorch.RSynaptic(alpha=0.5, beta=0.9, linear_features=HIDDEN)
    m.graded_spikes_factor = torch.tensor(2.0)
    refused(m, "feeds back through its recurrent layer")


def test_refuses_a_parameter_neither_scalar_nor_per_channel():
    refused(snntorch.Synaptic(alpha=torch.rand(*CONV), beta=0.9), "alpha of shape", CONV)


def test_refuses_a_reset_mechanism_changed_after_construction():
    m = snntorch.Leaky(beta=0.9)
    m.reset_mechanism = "zero"
    refused(m, "changed after construction")


def test_refuses_rsynaptic_without_reset_delay():
    refused(snntorch.RSynaptic(alpha=0.5, beta=0.9, linear_features=HIDDEN, reset_delay=False),
            "arguments of the call")


@pytest.mark.parametrize("layer,match", [(nn.Conv2d(2, 2, 3, padding=1, dilation=1, stride=2), "stride"),
                                         (nn.Sequential(nn.Linear(HIDDEN, HIDDEN)), "not the nn.Linear")])
def test_refuses_a_recurrent_layer_snntorch_does_not_build(layer, match):
    m = snntorch.RLeaky(beta=0.9, linear_features=HIDDEN) if match.startswith("not") else \
        snntorch.RLeaky(beta=0.9, conv2d_channels=2, kernel_size=3)
    m.recurrent = layer
    refused(m, match, (HIDDEN,) if match.startswith("not") else CONV)


def test_refuses_an_alpha_whose_tau_is_not_finite():
    refused(snntorch.Alpha(alpha=-0.5, beta=-1.0), "tau_alpha")


def test_refuses_a_neuron_without_converter():
    refused(snntorch.SConv2dLSTM(2, 2, 3), "SConv2dLSTM has no converter", shape=(2, 5, 5))


def test_refuses_slstm_which_cannot_run_in_float64():
    """The reason is real: snnTorch's own SLSTM raises in float64 (its first-step state is float32 zeros)."""
    module = snntorch.SLSTM(HIDDEN, HIDDEN).double()
    with pytest.raises(RuntimeError, match="dtype"):
        module(torch.zeros(3, HIDDEN, dtype=torch.float64))
    refused(snntorch.SLSTM(HIDDEN, HIDDEN), "cannot run in float64")


def test_refuses_the_wrong_stepping():
    refused(snntorch.Leaky(beta=0.9), "SnnTorchMultiStep", stepping="multistep")
    refused(SnnTorchMultiStep(snntorch.Leaky(beta=0.9)), "one time step", stepping="step")


# -- ops on snnTorch's spikes in the float64 run -------------------------------------------------------------------
class _PooledSpikes(nn.Module):
    """An audio-style net as snnTorch users write it: two Conv1d branches, their spikes joined and averaged over
    time-frequency bins (``torch.cat(...).mean(-1)``), a Linear read-out neuron with its membrane output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1, self.c2 = nn.Conv1d(4, 6, 3, padding=1), nn.Conv1d(4, 6, 5, padding=2)
        self.l1 = snntorch.Leaky(beta=0.9, init_hidden=True)
        self.l2 = snntorch.Leaky(beta=0.8, init_hidden=True)
        self.fc = nn.Linear(12, 3)
        self.l3 = snntorch.Leaky(beta=0.9, init_hidden=True, output=True)

    def forward(self, x):
        h = torch.cat([self.l1(self.c1(x)), self.l2(self.c2(x))], dim=1).contiguous().mean(dim=-1)
        return self.l3(self.fc(h))


def test_a_mean_of_snntorch_spikes_is_proved_in_float64():
    """snnTorch's float32 spikes would make torch compute the mean in float32 inside the float64 run (it differed
    from the proof by ~1e-8): in that run its neurons' outputs take their input's dtype, so the mean is float64."""
    import spikec
    x = (np.random.default_rng(0).random((8, 3, 4, 7)) < 0.5).astype(float)
    c = spikec.compile(_PooledSpikes().eval(), x, targets=("onnx",))
    assert c.equivalent, c.report["frontend"]["first_mismatches"]
    assert c.report["frontend"]["max_rel_diff"] == 0 and c.report["frontend"]["spikes_compared"] > 0
    assert c.report["targets"]["onnx"]["equivalent"]
