"""SpikingJelly's CSNN tutorial makes its time steps inside forward (``x.unsqueeze(0).repeat(T, 1, 1, 1, 1)``):
refused by name, with the remedy of repeating outside the model, which then compiles and equals SpikingJelly."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.ir.errors import UnsupportedOp

sj = pytest.importorskip("spikingjelly.activation_based")
from spikingjelly.activation_based import functional, layer, neuron  # noqa: E402


class CSNN(nn.Module):
    def __init__(self, inside=True, T=4):
        super().__init__()
        torch.manual_seed(0)
        self.T, self.inside = T, inside
        self.conv_fc = nn.Sequential(layer.Conv2d(1, 4, 3, padding=1), neuron.IFNode(), layer.Flatten(),
                                     layer.Linear(4 * 8 * 8, 5), neuron.IFNode())
        functional.set_step_mode(self, step_mode="m")
        with torch.no_grad():   # positive drive: both layers fire
            for p in self.conv_fc.parameters():
                p.abs_().mul_(2)

    def forward(self, x):
        x_seq = x.unsqueeze(0).repeat(self.T, 1, 1, 1, 1) if self.inside else x
        return self.conv_fc(x_seq).mean(0)


def test_time_made_inside_forward_is_refused_with_the_remedy():
    x = np.random.default_rng(0).random((3, 1, 8, 8))
    with pytest.raises(UnsupportedOp, match=r"makes the time steps from one static input") as e:
        spikec.compile(CSNN().eval(), x, targets=())
    assert "repeat outside the model" in str(e.value)


def test_the_remedy_compiles_and_equals_spikingjelly():
    x = np.random.default_rng(0).random((3, 1, 8, 8)) * 2
    inside, outside = CSNN().eval(), CSNN(inside=False).eval()
    c = spikec.compile(outside, np.repeat(x[None], 4, 0), stepping="multistep", targets=())
    assert c.equivalent
    functional.reset_net(inside)
    with torch.no_grad():
        want = inside.double()(torch.as_tensor(x)).numpy()
    assert want.sum() > 0
    np.testing.assert_allclose(c.run(np.repeat(x[None], 4, 0)), want, rtol=1e-12, atol=1e-15)
