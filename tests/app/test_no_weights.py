"""A factory compiled without --weights: its initial weights, built under torch.manual_seed(--seed) so that two
runs agree, and a summary line that says so and how to pass trained weights."""
import numpy as np
import torch

import spikec
from spikec.app.summary import summary_text

FACTORY = '''import torch
from spikec import nn as snn


def net():  # no seed of its own: the weights are whatever the global RNG gives
    return torch.nn.Sequential(torch.nn.Linear(8, 6), snn.LIF(beta=0.9, threshold=0.5))
'''


def _compile(path, seed=0):
    torch.manual_seed(torch.seed())  # a different global state on every call: only spikec's seed may decide
    return spikec.compile(f"{path}:net", input_shape=(8,), steps=5, targets="none", seed=seed, probes=False)


def test_no_weights_is_seeded_reproducible_and_warned(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(FACTORY)
    a, b, other = _compile(path), _compile(path), _compile(path, seed=1)
    wa, wb = (np.asarray(c.compiled.graph.node("0").params["weight"]) for c in (a, b))
    assert np.array_equal(wa, wb)
    assert not np.array_equal(wa, np.asarray(other.compiled.graph.node("0").params["weight"]))
    x = np.ones((5, 2, 8))
    assert np.array_equal(np.asarray(a.run(x)), np.asarray(b.run(x)))
    text = summary_text(a.report)
    assert "warning: no --weights" in text and "torch.manual_seed(0)" in text and "--weights CKPT" in text


def test_the_callers_random_state_is_left_alone(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(FACTORY)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    _ = spikec.compile(f"{path}:net", input_shape=(8,), steps=3, targets="none", probes=False)
    assert torch.equal(torch.rand(3), expected)


def test_weights_given_is_not_warned():
    text = summary_text(spikec.compile("examples/digits/model.py:small", "examples/digits/inputs.npz",
                                       weights="examples/digits/checkpoint.pt", targets="none").report)
    assert "no --weights" not in text
