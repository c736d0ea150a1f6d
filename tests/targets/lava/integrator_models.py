"""snnTorch membrane read-outs for the Lava target (``integrator_models.py:factory``): Linear -> Leaky -> Linear ->
Leaky(output=True) whose ``mem`` alone is the model's output (the tutorials' read-out), with no reset (a leaky
integrator: Lava's LIF, standard_integrator.py) or a subtract reset (its mem depends on its spikes)."""
import torch
from torch import nn


class MemReadout(nn.Module):
    def __init__(self, reset: str):
        import snntorch as snn
        super().__init__()
        self.l1, self.l2 = nn.Linear(12, 10), nn.Linear(10, 6)
        self.n1 = snn.Leaky(beta=0.8, init_hidden=True, reset_mechanism="zero")
        self.n2 = snn.Leaky(beta=0.8, init_hidden=True, output=True, reset_mechanism=reset)

    def forward(self, x):
        _, mem = self.n2(self.l2(self.n1(self.l1(x))))
        return mem


def _init(net: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_((torch.rand(m.weight.shape, generator=g) * 2 - 0.8) * 1.6 / m.in_features ** 0.5)
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) * 2 - 1) * 0.1)
    return net


def mem_none():
    return _init(MemReadout("none"))


def mem_subtract():
    return _init(MemReadout("subtract"))
