"""Small model factories for the app-layer tests (loaded by path: ``tests/app/models.py:factory``)."""
import sys

import torch
from torch import nn

import spikec.nn as snn


class TwoOutputs(nn.Module):
    """Returns the spikes of a LIF layer and the real read-out after it: two recorded outputs."""
    input_shape = (12,)
    steps = 5

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc1 = nn.Linear(12, 16)
        self.lif = snn.LIF(beta=0.75, threshold=0.5)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        s = self.lif(self.fc1(x))
        return s, self.fc2(s)


def two_outputs():
    return TwoOutputs()


def one_output():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(12, 16), snn.LIF(beta=0.5, threshold=0.5), nn.Linear(16, 3))
    model.input_shape, model.steps = (12,), 4
    return model


def prints():
    print("factory chatter on stdout")
    return one_output()


def exits_zero():
    sys.exit(0)


class SmallConvLIF(nn.Module):
    """A small conv LIF network every target takes (Lava, NIR, ONNX): the Python API's test model.

    Built with no arguments, so an OUTDIR compiled from an instance can rebuild it (``source/model.py``)."""
    input_shape = (1, 6, 6)
    steps = 4

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.conv = snn.TimeDistributed(nn.Conv2d(1, 4, 3, padding=1, bias=False))
        self.lif1 = snn.LIF(beta=0.875, threshold=0.5, reset="subtract")
        self.fc = snn.TimeDistributed(nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
        self.lif2 = snn.LIF(beta=0.75, threshold=0.5, reset="zero")

    def forward(self, x):
        return self.lif2(self.fc(self.lif1(self.conv(x))))


def small_conv_lif():
    return SmallConvLIF()


class Scaled(nn.Module):
    """Spikes times 0.5: a scale node, which NIR and ONNX express and the Lava target refuses by name."""
    input_shape = (12,)
    steps = 4

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.fc = nn.Linear(12, 6)
        self.lif = snn.LIF(beta=0.5, threshold=0.5)

    def forward(self, x):
        return self.lif(self.fc(x)) * 0.5


def scaled():
    return Scaled()


def relu_mlp():
    """A ReLU ANN for --coding ttfs (which only the ONNX target lowers)."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(12, 12), nn.ReLU(), nn.Linear(12, 3))
    model.input_shape, model.steps = (12,), 1
    return model
