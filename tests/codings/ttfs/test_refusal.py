"""Ops with no TTFS form fail with the node named and the reason."""
import numpy as np
import pytest
from torch import nn

import spikec.nn as snn
import spikec.codings.ttfs  # noqa: F401
from spikec.ir.errors import PassError, UnsupportedOp
from spikec.frontend import trace
from spikec.codings.ttfs import assign_ttfs_timing
from spikec.targets.ttfs import compile_ttfs


class MaxPoolCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = snn.TimeDistributed(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = snn.TimeDistributed(nn.Flatten(), nn.Linear(16, 3))

    def forward(self, x):
        return self.head(self.features(x))


def test_max_pool_is_refused_naming_the_node():
    model = MaxPoolCNN()
    g = trace(model, (1, 4, 4), input_kind="real")
    x = np.random.default_rng(0).random((1, 3, 1, 4, 4))
    with pytest.raises(UnsupportedOp) as e:
        assign_ttfs_timing(g, x)
    assert "features.2" in e.value.where and "maxpool2d" in e.value.where
    assert "max-pooling has no TTFS form" in e.value.what and "AvgPool2d" in e.value.remedy
    with pytest.raises(PassError) as e:    # the driver hook: the pass manager names the pass too (exit code 2)
        compile_ttfs(model, g, x)
    assert e.value.exit_code == 2 and "assign_ttfs_timing" in e.value.where and "features.2" in e.value.where
    assert "AvgPool2d" in e.value.remedy


def test_gelu_traces_but_has_no_ttfs_form_naming_the_module():
    """GELU is in the ATen capture's op set now (op gelu); the TTFS coding has no form for it and says so."""
    g = trace(nn.Sequential(nn.Linear(3, 3), nn.GELU(), nn.Linear(3, 2)), (3,), input_kind="real")
    with pytest.raises(UnsupportedOp) as e:
        assign_ttfs_timing(g, np.ones((2, 1, 3)))
    assert "'1'" in e.value.where and "gelu has no TTFS form" in e.value.what


def test_sigmoid_traces_but_has_no_ttfs_form_naming_the_module():
    g = trace(nn.Sequential(nn.Linear(3, 3), nn.Sigmoid(), nn.Linear(3, 2)), (3,), input_kind="real")
    with pytest.raises(UnsupportedOp) as e:
        assign_ttfs_timing(g, np.ones((2, 1, 3)))
    assert "'1'" in e.value.where and "sigmoid has no TTFS form" in e.value.what


def test_spiking_neurons_and_softmax_are_refused():
    lif = nn.Sequential(nn.Linear(3, 3), snn.LIF(beta=0.9, threshold=1.0), nn.Linear(3, 2))
    g = trace(lif, (3,), input_kind="real")
    with pytest.raises(UnsupportedOp) as e:
        assign_ttfs_timing(g, np.ones((2, 1, 3)))
    assert "'1'" in e.value.where and "spiking neuron" in e.value.what

    class Soft(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x).softmax(-1)

    g = trace(Soft(), (3,), input_kind="real")
    with pytest.raises(UnsupportedOp, match="softmax"):
        assign_ttfs_timing(g, np.ones((1, 2, 3)))
