"""--stepping auto (spikec/app/conventions.py): the only convention that fits, multistep for a stateless
model, and a refusal listing each convention's reason when none fits."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snc
from spikec.app.conventions import choose
from spikec.compiler.errors import BadInput

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
