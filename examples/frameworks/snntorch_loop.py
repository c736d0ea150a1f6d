"""snnTorch tutorial 5, as its users write it: forward runs its own time loop over a static input.

    spikec compile examples/frameworks/snntorch_loop.py:net --weights CKPT --inputs X.npz --stepping loop

``X.npz`` holds ``input`` shaped ``[B, 64]``, exactly what ``forward`` takes; the loop runs ``num_steps``.
"""
import snntorch as snn
import torch
from torch import nn

num_inputs, num_hidden, num_outputs, num_steps, beta = 64, 32, 10, 12, 0.95


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(num_inputs, num_hidden)
        self.lif1 = snn.Leaky(beta=beta)
        self.fc2 = nn.Linear(num_hidden, num_outputs)
        self.lif2 = snn.Leaky(beta=beta)

    def forward(self, x):
        mem1 = self.lif1.init_leaky()
        mem2 = self.lif2.init_leaky()
        spk2_rec, mem2_rec = [], []
        for step in range(num_steps):
            cur1 = self.fc1(x)
            spk1, mem1 = self.lif1(cur1, mem1)
            cur2 = self.fc2(spk1)
            spk2, mem2 = self.lif2(cur2, mem2)
            spk2_rec.append(spk2)
            mem2_rec.append(mem2)
        return torch.stack(spk2_rec, dim=0), torch.stack(mem2_rec, dim=0)


def net():
    torch.manual_seed(0)
    return Net()
