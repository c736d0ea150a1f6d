"""Norse's tutorials record a loop into a preallocated tensor (``voltages = torch.zeros(T, B, 10)``, then
``voltages[ts, :, :] = v`` each step) and index the input as ``x[ts, :]``: the loop capture takes that buffer as the
stacked record when every step writes it whole once (``loop_buffer.as_stacked``), and ``x[ts, :]`` as ``x[ts]``.
Checked against Norse's own modules; anything else is left alone and refused by name."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.frontend.loop import concrete_trace
from spikec.frontend.loop_buffer import as_stacked, step_index
from spikec.ir.errors import UnsupportedOp

norse = pytest.importorskip("norse.torch")


class Tutorial(nn.Module):
    """The shape of Norse's MNIST tutorial ConvNet, small: conv, LIFCell, max pool, linear, LICell, its own loop."""

    def __init__(self, write="whole"):
        super().__init__()
        torch.manual_seed(0)
        self.write = write
        self.conv = nn.Conv2d(1, 4, 3)
        self.lif = norse.LIFCell()
        self.fc = nn.Linear(4 * 3 * 3, 5)
        self.out = norse.LICell()
        with torch.no_grad():
            self.conv.weight.abs_().mul_(3)

    def forward(self, x):
        s0 = so = None
        voltages = torch.zeros(x.shape[0], x.shape[1], 5, dtype=x.dtype)
        for ts in range(x.shape[0]):
            z = self.conv(x[ts, :])
            z, s0 = self.lif(z, s0)
            z = torch.nn.functional.max_pool2d(z, 2, 2)
            v, so = self.out(self.fc(z.view(-1, 4 * 3 * 3)), so)
            if self.write == "whole":
                voltages[ts, :, :] = v
            elif self.write == "every other" and ts % 2 == 0:
                voltages[ts] = v
            elif self.write == "a slice":
                voltages[ts, :, :3] = v[:, :3]
        return voltages


def _x(steps=6, batch=3):
    return (np.random.default_rng(0).random((steps, batch, 1, 8, 8)) < 0.4).astype(np.float64)


@pytest.mark.parametrize("index,k", [(3, 3), ((2, slice(None)), 2), ((1, slice(None), slice(None)), 1),
                                     ((0, Ellipsis), 0), ((1, slice(0, 2)), None), ((slice(None), 1), None),
                                     ((True,), None), (None, None)])
def test_step_index_is_a_whole_step_only(index, k):
    assert step_index(index) == k


def test_the_buffer_becomes_the_stacked_record():
    """Before/after: the traced graph writes a tensor constant and returns it; after, the output is torch.stack of
    the written values, no __setitem__ left."""
    model = Tutorial()
    graph = concrete_trace(model, torch.as_tensor(_x()).float(), lambda m: type(m).__module__.startswith("norse"))
    assert sum(n.target == "__setitem__" for n in graph.nodes) == 6
    out = as_stacked(model, graph)
    (o,) = [n for n in out.nodes if n.op == "output"]
    assert o.args[0].target is torch.stack and len(o.args[0].args[0]) == 6
    assert not any(n.target == "__setitem__" for n in out.nodes)


def test_norses_tutorial_loop_compiles_and_equals_norse():
    x = _x()
    c = spikec.compile(Tutorial(), x, targets=())
    assert c.equivalent and c.report["frontend"]["stepping"] == "loop"
    with torch.no_grad():
        want = Tutorial().double()(torch.as_tensor(x)).numpy()
    assert np.abs(want).sum() > 0
    np.testing.assert_allclose(c.run(x), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("write", ["every other", "a slice"])
def test_a_buffer_not_written_whole_every_step_is_left_and_refused(write):
    model = Tutorial(write)
    graph = concrete_trace(model, torch.as_tensor(_x()).float(), lambda m: type(m).__module__.startswith("norse"))
    before = sum(n.target == "__setitem__" for n in graph.nodes)
    assert sum(n.target == "__setitem__" for n in as_stacked(model, graph).nodes) == before   # unchanged
    with pytest.raises(UnsupportedOp, match="not a record stacked"):
        spikec.compile(Tutorial(write), _x(), stepping="loop", targets=())
