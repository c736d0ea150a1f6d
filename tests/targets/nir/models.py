"""Model factories for the NIR target tests (loaded by path: ``tests/targets/nir/models.py:factory``).

Every factory takes no arguments and seeds its own weights, so a compile is reproducible.
"""
import torch
from torch import nn

import spikec.nn as snn


def _seeded(model: nn.Module, seed: int, gain: float = 1.0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * gain)
    return model.eval()


class HardConv(nn.Module):
    """Hard-reset LIF conv network: conv -> LIF -> conv (stride 2) -> LIF -> flatten -> linear -> LIF."""

    input_shape = (1, 8, 8)
    steps = 8

    def __init__(self, beta2=0.9):
        super().__init__()
        self.conv1 = snn.TimeDistributed(nn.Conv2d(1, 4, 3, padding=1))
        self.lif1 = snn.LIF(beta=0.8, threshold=1.0, reset="zero")
        self.conv2 = snn.TimeDistributed(nn.Conv2d(4, 8, 3, stride=2, padding=1))
        self.lif2 = snn.LIF(beta=beta2, threshold=0.75, reset="zero")
        self.head = snn.TimeDistributed(nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
        self.lif3 = snn.LIF(beta=0.5, threshold=0.5, reset="zero")

    def forward(self, x):
        return self.lif3(self.head(self.lif2(self.conv2(self.lif1(self.conv1(x))))))


class HardDense(nn.Module):
    """Hard-reset LIF dense network: linear -> LIF -> linear -> LIF."""

    input_shape = (20,)
    steps = 10

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.lif1 = snn.LIF(beta=0.95, threshold=1.0, reset="zero")
        self.fc2 = nn.Linear(32, 6)
        self.lif2 = snn.LIF(beta=0.7, threshold=0.6, reset="zero")

    def forward(self, x):
        return self.lif2(self.fc2(self.lif1(self.fc1(x))))


class SoftConv(nn.Module):
    """Subtract-reset LIF conv network (no snnTorch/Norse form) ending in a hard-reset LIF."""

    input_shape = (2, 6, 6)
    steps = 6

    def __init__(self):
        super().__init__()
        self.conv1 = snn.TimeDistributed(nn.Conv2d(2, 4, 3, padding=1))
        self.lif1 = snn.LIF(beta=0.9, threshold=0.8, reset="subtract")
        self.conv2 = snn.TimeDistributed(nn.Conv2d(4, 4, 3, padding=1))
        self.lif2 = snn.LIF(beta=0.6, threshold=1.0, reset="zero")

    def forward(self, x):
        return self.lif2(self.conv2(self.lif1(self.conv1(x))))


def hard_conv():
    return _seeded(HardConv(), 1, gain=0.9)


def hard_conv_channel_beta():
    """As ``hard_conv`` with a per-channel beta in lif2 (snnTorch keeps one threshold: it cannot run this)."""
    m = HardConv()
    m.lif2.beta = torch.linspace(0.5, 0.95, 8)
    return _seeded(m, 1, gain=0.9)


def hard_dense():
    return _seeded(HardDense(), 2, gain=0.6)


def soft_conv():
    return _seeded(SoftConv(), 3, gain=0.7)


# -- NIR files as models --------------------------------------------------------------------
GOLDEN = __import__("pathlib").Path(__file__).resolve().parent / "golden"


def snntorch_network():
    """A seeded snnTorch network (per-neuron parameter tensors: 0-d ones break nir's type inference)."""
    import snntorch
    g = torch.Generator().manual_seed(5)
    net = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        snntorch.Leaky(beta=torch.full((4, 6, 6), 0.8), threshold=torch.full((4, 6, 6), 0.5), init_hidden=True,
                       reset_mechanism="zero"),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 5),
        snntorch.Leaky(beta=torch.full((5,), 0.9), threshold=torch.full((5,), 0.7), init_hidden=True,
                       reset_mechanism="zero", output=True))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * 0.8)
    return net.eval()


def write_snntorch_file(path):
    """``path`` written by snnTorch's own exporter (``snntorch.export_nir.export_to_nir``)."""
    import nir
    from snntorch.export_nir import export_to_nir
    graph = export_to_nir(snntorch_network(), torch.zeros(1, 1, 6, 6), ignore_dims=[0])
    nir.write(path, graph)
    return path


def snntorch_file():
    """The checked-in snnTorch-written NIR file as a model (the NIR frontend's module)."""
    from spikec.frontend.nir_file import nir_model
    return nir_model(GOLDEN / "snntorch_conv.nir")
