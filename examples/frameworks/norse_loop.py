"""Norse, stepped inside the model: ``forward`` loops over ``x[t]`` and threads each cell's state itself.

    spikec compile examples/frameworks/norse_loop.py:net --weights CKPT --inputs X.npz --stepping loop

``X.npz`` holds ``input`` shaped ``[T, B, 32]``; the loop runs ``x.shape[0]`` steps.
"""
import norse.torch as norse
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 24)
        self.cell = norse.LIFCell()
        self.fc2 = nn.Linear(24, 10)
        self.out = norse.LICell(norse.LIParameters(tau_mem_inv=torch.tensor(50.0)))

    def forward(self, x):
        s1 = s2 = None
        voltages = []
        for t in range(x.shape[0]):
            z, s1 = self.cell(self.fc1(x[t]), s1)
            v, s2 = self.out(self.fc2(z), s2)
            voltages.append(v)
        return torch.stack(voltages)


def net():
    torch.manual_seed(0)
    return Net()
