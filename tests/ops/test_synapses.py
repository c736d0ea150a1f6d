"""Synaptic event counts read from tap sums (``spikec.ops.synapses.tap_sums``) equal the summed output of the
convolution they stand for, exactly, over strides, paddings, dilations, groups and kernel shapes; so do
NeuroBench's binarized sums (``spikec.core.metrics._binarized_sum``)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from spikec.ir.graph import Node, TensorType
from spikec.core.metrics import _binarized_sum
from spikec.ops.synapses import conv_events, tap_sums, windowsum_events

CASES = [  # (C_in, C_out, groups, kernel, stride, padding, dilation, H, W)
    (3, 8, 1, (3, 3), (1, 1), (1, 1), (1, 1), 9, 9),
    (4, 6, 2, (3, 3), (2, 1), (1, 0), (1, 2), 7, 7),
    (3, 16, 1, (7, 7), (2, 2), (3, 3), (1, 1), 20, 17),
    (8, 8, 8, (3, 1), (1, 2), (0, 2), (2, 1), 11, 6),
    (6, 4, 1, (1, 1), (2, 2), (0, 0), (1, 1), 8, 5),
    (2, 6, 2, (2, 3), (3, 2), (2, 1), (1, 1), 5, 9),
]


def _node(c_in, c_out, groups, kernel, stride, padding, dilation, weight):
    return Node("conv", "conv2d", ("x",), TensorType((c_out, 1, 1)), {"stride": stride, "padding": padding,
                                                                      "dilation": dilation, "groups": groups},
                {"weight": weight})


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("counts", [False, True])
def test_conv_counts_equal_the_convolution_summed(case, counts):
    c_in, c_out, groups, kernel, stride, padding, dilation, h, w = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x = rng.random((5, c_in, h, w)) < 0.4
    active = torch.as_tensor(x * rng.integers(1, 4, x.shape) if counts else x, dtype=torch.float64)
    w01 = torch.as_tensor(rng.random((c_out, c_in // groups, *kernel)) < 0.6, dtype=torch.float64)
    node = _node(c_in, c_out, groups, kernel, stride, padding, dilation, w01.numpy())
    conv = lambda weight: int(F.conv2d(active, weight, None, stride, padding, dilation, groups).sum())
    assert conv_events(node, active) == conv(torch.ones_like(w01))
    assert _binarized_sum(node, active, w01) == conv(w01)
    assert tap_sums(active, kernel, stride, padding, dilation).shape == (c_in, *kernel)


@pytest.mark.parametrize("k,d", [(3, 1), (5, 1), (3, 2), (1, 1)])
def test_windowsum_counts_equal_the_depthwise_convolution_summed(k, d):
    rng = np.random.default_rng(k * 10 + d)
    active = torch.as_tensor(rng.random((4, 3, 9, 8)) < 0.3, dtype=torch.float64)
    node = Node("ws", "windowsum", ("x",), TensorType((3, 9, 8)), {"kernel": k, "dilation": d})
    ones = torch.ones(3, 1, k, k, dtype=torch.float64)
    expected = int(F.conv2d(active, ones, padding=d * (k - 1) // 2, dilation=d, groups=3).sum())
    assert windowsum_events(node, active) == expected


def test_the_dense_count_of_an_all_ones_input():
    """NeuroBench's Dense: an all-ones input through an all-ones layer (padding taps not counted)."""
    node = _node(3, 4, 1, (3, 3), (1, 1), (1, 1), (1, 1), np.ones((4, 3, 3, 3)))
    ones = torch.ones(1, 3, 5, 5, dtype=torch.float64)
    w = torch.ones(4, 3, 3, 3, dtype=torch.float64)
    # per input channel and output channel: 4 corners read 4 taps, 12 edge positions 6, 9 inner positions 9
    assert _binarized_sum(node, ones, w) == int(F.conv2d(ones, w, padding=1).sum()) == 4 * 3 * (16 + 72 + 81)
