"""Norse's multi-step modules on ``[T, B, ...]``: ``norse.torch.LIF`` returns ``(spikes, state)``, and the
per-step convolution runs on time and batch merged, ``conv(x.flatten(0, 1)).unflatten(0, (T, B))``.

    spikec compile examples/frameworks/norse_multistep.py:net --weights CKPT --inputs X.npz --stepping multistep
"""
import norse.torch as norse
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.mul_(10.0)  # Norse's default threshold is 1: start with currents that reach it
        self.lif1 = norse.LIF()
        self.fc = nn.Linear(4 * 8 * 8, 10)
        self.lif2 = norse.LIF()

    def forward(self, x):
        T, B = x.shape[0], x.shape[1]
        z = self.conv(x.flatten(0, 1)).unflatten(0, (T, B))
        z, _ = self.lif1(z)
        z, _ = self.lif2(self.fc(z.flatten(2)))
        return z


def net():
    torch.manual_seed(0)
    return Net()
