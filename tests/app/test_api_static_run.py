"""``Compilation.run`` takes what the compile took: a loop model over one static input, compiled on ``[B, ...]``,
runs on ``[B, ...]`` too (the unseen-network user's bug: the compile accepted it, ``run`` refused it)."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.ir.errors import BadInput

snntorch = pytest.importorskip("snntorch")


class Static(nn.Module):
    """snnTorch's tutorial loop: the same input x every step (no x[step])."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(5, 6)
        self.lif = snntorch.Leaky(beta=0.9)

    def forward(self, x):
        mem, rec = self.lif.init_leaky(), []
        for _ in range(6):
            spk, mem = self.lif(self.fc(x), mem)
            rec.append(spk)
        return torch.stack(rec)


def test_a_static_input_runs_as_it_compiled_and_matches_the_model():
    model = Static().eval()
    x = np.random.default_rng(0).random((8, 5)) * 2
    c = spikec.compile(model, x, stepping="loop")
    assert c.equivalent and c.report["frontend"]["static_input"] is True
    fresh = np.random.default_rng(1).random((3, 5)) * 2
    got = c.run(fresh)
    with torch.no_grad():
        want = model.double()(torch.as_tensor(fresh)).numpy()
    assert got.shape == (6, 3, 6) and got.sum() > 0
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(c.run(np.broadcast_to(fresh, (6, 3, 5))), got)   # [T, B, ...] as before


def test_a_static_input_of_the_wrong_shape_is_still_named():
    c = spikec.compile(Static().eval(), np.random.default_rng(0).random((4, 5)), stepping="loop")
    with pytest.raises(BadInput, match="per-step shape|dimensions"):
        c.run(np.zeros((3, 7)))
