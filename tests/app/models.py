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
