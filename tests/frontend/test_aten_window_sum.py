"""``AvgPool2d(divisor_override=d)`` (a window sum over d, what a sum-pooling user writes) is captured as a depthwise
convolution of ones (and a division for d != 1), equal to torch's own pooling; ``ceil_mode`` with it is refused."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.ir.errors import UnsupportedOp
from spikec.frontend.aten.lowerings import _window_sum  # noqa: F401  (the lowering under test)

snntorch = pytest.importorskip("snntorch")
from snntorch import utils as snn_utils  # noqa: E402


class SumPoolNet(nn.Module):
    def __init__(self, divisor=1, ceil_mode=False, padding=0):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        with torch.no_grad():   # positive drive, so the neurons after the window sum fire
            self.conv.weight.abs_().mul_(0.8)
        self.pool = nn.AvgPool2d(2, padding=padding, divisor_override=divisor, ceil_mode=ceil_mode)
        self.lif = snntorch.Leaky(beta=0.8, init_hidden=True)

    def forward(self, x):
        return self.lif(self.pool(self.conv(x)))


def _spikes(seed=0):
    return (np.random.default_rng(seed).random((4, 2, 1, 7, 7)) < 0.4).astype(np.float64)


@pytest.mark.parametrize("divisor,padding", [(1, 0), (3, 1)])
def test_window_sum_matches_torch_and_proves(divisor, padding):
    model = SumPoolNet(divisor, padding=padding).eval()
    c = spikec.compile(model, _spikes(), stepping="step", targets=("onnx",))
    assert c.equivalent and "conv2d" in [n.op for n in c.graph.nodes]
    x = _spikes(1)
    snn_utils.reset(model)
    with torch.no_grad():
        want = torch.stack([model.double()(torch.as_tensor(x[t])) for t in range(4)]).numpy()
    got = c.run(x)
    assert want.sum() > 0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_ceil_mode_with_a_divisor_is_refused_by_name():
    with pytest.raises(UnsupportedOp, match="divisor_override with ceil_mode"):
        spikec.compile(SumPoolNet(1, ceil_mode=True).eval(), _spikes(), stepping="step", targets=())
