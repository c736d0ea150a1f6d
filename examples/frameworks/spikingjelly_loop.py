"""SpikingJelly single-step neurons (the default ``step_mode='s'``) stepped by a loop inside ``forward``.

    spikec compile examples/frameworks/spikingjelly_loop.py:net --weights CKPT --inputs X.npz --stepping loop

``X.npz`` holds ``input`` shaped ``[T, B, 32]``; spikec resets the neurons with ``functional.reset_net``.
"""
import torch
from spikingjelly.activation_based import layer, neuron, surrogate
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = layer.Linear(32, 24)
        self.sn1 = neuron.LIFNode(tau=2.0, surrogate_function=surrogate.ATan())
        self.fc2 = layer.Linear(24, 10)
        self.sn2 = neuron.IFNode(surrogate_function=surrogate.ATan())

    def forward(self, x):
        spikes = []
        for t in range(x.shape[0]):
            spikes.append(self.sn2(self.fc2(self.sn1(self.fc1(x[t])))))
        return torch.stack(spikes)


def net():
    torch.manual_seed(0)
    return Net()
