"""--stepping auto (spikec/app/conventions.py): the only convention that fits, multistep for a stateless
model, and a refusal listing each convention's reason when none fits."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snc
from spikec.app.conventions import choose
from spikec.ir.errors import BadInput

X = (np.random.default_rng(0).random((5, 2, 6)) < 0.5).astype(np.float64)


class PerStep(nn.Module):
    """One time step per call, state kept in an attribute (as init_hidden neurons do)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.lif = snc.LIF(beta=0.5)

    def forward(self, x):
        return self.lif(self.fc(x))


def test_a_multistep_spikec_model_is_multistep():
    model = nn.Sequential(nn.Linear(6, 4), snc.LIF(beta=0.5))
    assert choose(model, "auto", X, "binary", None).stepping == "multistep"


def test_a_stateless_model_fits_two_conventions_and_is_taken_as_multistep():
    assert choose(nn.Sequential(nn.Linear(6, 4), nn.ReLU()), "auto", X, "binary", None).stepping == "multistep"


def test_a_snntorch_step_model_is_step():
    snntorch = pytest.importorskip("snntorch")
    model = nn.Sequential(nn.Linear(6, 4), snntorch.Leaky(beta=0.5, init_hidden=True))
    assert choose(model, "auto", X, "binary", None).stepping == "step"


def test_none_fitting_lists_each_conventions_reason():
    model = nn.Sequential(nn.Linear(7, 4))  # wrong input width for every convention
    with pytest.raises(BadInput) as info:
        choose(model, "auto", X, "binary", None)
    msg = str(info.value)
    assert "weight (4, 7)" in msg or "7" in msg  # multistep's own reason first, with its remedy
    assert "--stepping auto tried every convention" in msg and all(f"{s}:" in msg for s in ("step", "loop"))


def test_an_unknown_convention_is_refused():
    with pytest.raises(BadInput, match="not a model convention"):
        choose(nn.Linear(6, 4), "sideways", X, "binary", None)



class Loop(nn.Module):
    """Its own time loop (``for x_t in x``), stateless: no other convention can trace it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        return torch.stack([torch.relu(self.fc(x_t)) for x_t in x])


def test_auto_captures_the_loop_on_one_sample_first_when_another_convention_fits(monkeypatch):
    """multistep fits a multi-step model: the loop capture (a real forward) runs on x[:, :1] only, then stops;
    a loop model that nothing else fits is captured once, on all samples, as before."""
    import spikec.app.conventions as conventions
    seen = []
    real = conventions.loop_convention
    monkeypatch.setattr(conventions, "loop_convention", lambda m, raw, *a, **k: seen.append(raw.shape) or
                        real(m, raw, *a, **k))
    model = nn.Sequential(nn.Linear(6, 4), snc.LIF(beta=0.5))
    assert choose(model, "auto", X, "binary", None).stepping == "multistep"
    assert seen == []  # its forward returns no stacked record: refused unrun (tests/app/test_loop_unrun.py)
    seen.clear()
    conv = choose(Loop(), "auto", X, "binary", None)
    assert conv.stepping == "loop" and conv.x.shape == X.shape and seen == [X.shape]


def test_a_forward_drawing_random_numbers_is_refused_as_such():
    """snnTorch's tutorials encode with spikegen.rate (Bernoulli draws); inside forward it makes the model a random
    function, which no convention fits: the refusal says so, not fx's trace failure."""
    import numpy as np
    import pytest
    import torch
    from torch import nn
    import spikec
    from spikec.ir.errors import BadInput

    class Encoded(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):   # [B, 4] static input, rate-coded over 5 steps inside
            spikes = torch.bernoulli(x.unsqueeze(0).repeat(5, 1, 1))
            return torch.stack([self.fc(spikes[t]) for t in range(len(spikes))])

    with pytest.raises(BadInput, match="draws random numbers"):
        spikec.compile(Encoded(), np.random.default_rng(0).random((3, 4)).astype(np.float32), targets=())
