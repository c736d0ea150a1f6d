"""--stepping auto refuses the loop convention without running the model when another convention fits and the
forward, traced symbolically, returns no record stacked over steps (conventions._returns_no_record); a forward it
cannot tell so about is captured as before, on x[:, :1] first."""
import numpy as np
import torch
from torch import nn

import spikec.app.conventions as conventions
import spikec.nn as snc
from spikec.app.conventions import choose

X = (np.random.default_rng(0).random((5, 2, 6)) < 0.5).astype(np.float64)


class Loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        return torch.stack([torch.relu(self.fc(x_t)) for x_t in x])


class FixedLoop(nn.Module):
    """A loop over a fixed number of steps reading x[t]: fx traces it symbolically, and it returns a stack."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        return torch.stack([torch.relu(self.fc(x[t])) for t in range(5)])


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.lif = nn.Linear(6, 4), snc.LIF(beta=0.5)

    def forward(self, x):
        return self.lif(self.fc(x)).mean(0)


def _captures(monkeypatch):
    seen = []
    real = conventions.loop_convention
    monkeypatch.setattr(conventions, "loop_convention", lambda m, raw, *a, **k: seen.append(raw.shape) or
                        real(m, raw, *a, **k))
    return seen


def test_a_forward_returning_no_stack_is_refused_as_a_loop_unrun(monkeypatch):
    seen = _captures(monkeypatch)
    model = nn.Sequential(nn.Linear(6, 4), snc.LIF(beta=0.5))
    refusal = conventions._returns_no_record(model)
    assert refusal is not None and "not a record stacked over the loop's steps" in refusal.what
    assert conventions._returns_no_record(Head()) is not None  # a .mean(0) of no stack
    assert choose(model, "auto", X, "binary", None).stepping == "multistep" and seen == []


def test_what_the_symbolic_trace_cannot_tell_is_captured(monkeypatch):
    assert conventions._returns_no_record(Loop()) is None        # iterates its input: fx cannot trace it
    assert conventions._returns_no_record(FixedLoop()) is None   # returns a stack: only the capture can tell
    seen = _captures(monkeypatch)
    conv = choose(Loop(), "auto", X, "binary", None)
    assert conv.stepping == "loop" and seen == [X.shape]


def test_without_the_symbolic_refusal_the_capture_runs_on_one_sample_first(monkeypatch):
    """The capture's own path (a forward fx cannot trace symbolically): x[:, :1] first, then stops."""
    monkeypatch.setattr(conventions, "_returns_no_record", lambda model: None)
    seen = _captures(monkeypatch)
    model = nn.Sequential(nn.Linear(6, 4), snc.LIF(beta=0.5))
    assert choose(model, "auto", X, "binary", None).stepping == "multistep"
    assert seen == [(5, 1, 6)]
