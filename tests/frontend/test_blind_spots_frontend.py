"""Frontend checks driven with the input that triggers them: ``--stepping step`` resets every hidden state of an
snnTorch neuron (``syn`` of Synaptic, ``syn_exc`` / ``syn_inh`` of Alpha, ``spk`` of RLeaky, ``mem``) before and
after a run, so a step model run twice gives the same outputs as a fresh one, and leaves no state behind."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

from spikec.frontend.stepping import Stepped, cast_inputs_to_params, reset_state

snntorch = pytest.importorskip("snntorch", reason="snnTorch is an optional extra")

STEPS, BATCH, N = 6, 2, 4


def _neuron(kind):
    if kind == "Synaptic":
        return snntorch.Synaptic(alpha=0.9, beta=0.8, threshold=0.5, init_hidden=True), ("syn", "mem")
    if kind == "Alpha":
        return snntorch.Alpha(alpha=0.9, beta=0.8, threshold=0.05, init_hidden=True), ("syn_exc", "syn_inh", "mem")
    if kind == "RLeaky":
        return snntorch.RLeaky(beta=0.8, threshold=0.5, linear_features=3, init_hidden=True), ("spk", "mem")
    return snntorch.Leaky(beta=0.8, threshold=0.5, init_hidden=True), ("mem",)


@pytest.mark.parametrize("kind", ["Synaptic", "Alpha", "RLeaky", "Leaky"])
def test_a_step_model_run_twice_starts_from_its_reset_state_both_times(kind):
    torch.manual_seed(0)
    neuron, hidden = _neuron(kind)
    model = nn.Sequential(nn.Linear(N, 3), neuron).double()
    cast_inputs_to_params(model)   # snnTorch's float32 spikes into RLeaky's float64 recurrence, as spikec runs it
    fresh = copy.deepcopy(model)
    x = torch.from_numpy(np.random.default_rng(0).normal(0.6, 1.0, (STEPS, BATCH, N)))
    with torch.no_grad():
        first = Stepped(model)(x)
        for name in hidden:   # nothing left behind: every hidden state is back to zeros
            value = getattr(neuron, name)
            assert isinstance(value, torch.Tensor) and not value.any(), name
        for name in hidden:   # a user who ran the module in between leaves states that the next run must reset
            setattr(neuron, name, torch.full((BATCH, 3), 0.4, dtype=torch.float64))
        second = Stepped(model)(x)
        alone = Stepped(fresh)(x)
    assert first.any() and not first.all()   # the neuron fires and rests
    assert torch.equal(first, second) and torch.equal(first, alone)


def test_reset_state_zeroes_every_snntorch_hidden_state_in_place_of_its_shape():
    neuron, hidden = _neuron("Alpha")
    for name in hidden:
        setattr(neuron, name, torch.ones(2, 5))
    reset_state(nn.Sequential(neuron))
    for name in hidden:
        value = getattr(neuron, name)
        assert value.shape == (2, 5) and not value.any(), name


def test_a_step_forward_returning_no_tensor_is_refused_by_name():
    from spikec.ir.errors import BadInput

    class Dicts(nn.Module):
        def forward(self, x):
            return {"y": x}
    with pytest.raises(BadInput, match="forward returned dict"):
        Stepped(Dicts())(torch.zeros(2, 1, 3))


def test_a_forward_with_a_state_argument_has_its_state_threaded():
    """Norse's convention: ``forward(x, state=None)`` returns ``(y, state)``; each step gets the last state back."""
    class Counter(nn.Module):
        def forward(self, x, state=None):
            n = 0 if state is None else state[0]
            return x + n, (n + 1,)
    x = torch.zeros(4, 2, 3, dtype=torch.float64)
    y = Stepped(Counter())(x)
    assert [float(y[t, 0, 0]) for t in range(4)] == [0.0, 1.0, 2.0, 3.0]


def test_a_spikingjelly_single_step_model_is_reset_before_and_after_a_run():
    sj = pytest.importorskip("spikingjelly.activation_based.neuron")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(N, 3), sj.LIFNode(tau=2.0, step_mode="s")).double()
    x = torch.from_numpy(np.random.default_rng(1).normal(3.0, 3.0, (STEPS, BATCH, N)))
    with torch.no_grad():
        first = Stepped(model)(x)
        assert isinstance(model[1].v, float) or not torch.as_tensor(model[1].v).any()   # reset after the run
        model[1].v = torch.full((BATCH, 3), 0.7, dtype=torch.float64)   # a state left by the user's own run
        second = Stepped(model)(x)
    assert first.any() and not first.all() and torch.equal(first, second)
