"""A SpikingJelly model a target once crashed on (``layer.Conv1d`` on Lava: a shape broadcast in the runner)."""
import torch
from torch import nn
from spikingjelly.activation_based import layer, neuron


class Conv1dNet(nn.Module):
    input_shape = (2, 16)
    steps = 4

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = layer.Conv1d(2, 8, 3, padding=1, bias=False, step_mode="m")
        self.sn = neuron.IFNode(step_mode="m")
        self.flat = layer.Flatten(step_mode="m")
        self.fc = layer.Linear(8 * 16, 4, bias=False, step_mode="m")
        self.sn2 = neuron.IFNode(step_mode="m")

    def forward(self, x):
        return self.sn2(self.fc(self.flat(self.sn(self.conv(x)))))


def conv1d_net():
    return Conv1dNet()
