"""snnTorch tutorials 6 and 7, as their users write them: a per-step ``nn.Sequential`` of convolutions and
``Leaky(init_hidden=True)`` neurons, stepped by ``utils.reset(net)`` and a time loop outside the model.

    spikec compile examples/frameworks/snntorch_step.py:net --weights CKPT --inputs X.npz --stepping step

``X.npz`` holds ``input`` shaped ``[T, B, 1, 12, 12]``; spikec resets the neurons as ``utils.reset`` does and
feeds ``input[t]`` step by step. The last layer's ``output=True`` returns ``(spk, mem)``: both are recorded.
"""
import snntorch as snn
import torch
from snntorch import surrogate
from torch import nn

beta = 0.5


def net():
    torch.manual_seed(0)
    spike_grad = surrogate.fast_sigmoid(slope=25)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.MaxPool2d(2),
                         snn.Leaky(beta=beta, spike_grad=spike_grad, init_hidden=True),
                         nn.Conv2d(4, 8, 3, padding=1), nn.MaxPool2d(2),
                         snn.Leaky(beta=beta, spike_grad=spike_grad, init_hidden=True),
                         nn.Flatten(), nn.Linear(8 * 3 * 3, 10),
                         snn.Leaky(beta=beta, spike_grad=spike_grad, init_hidden=True, output=True))
