"""The digits demo network in Loihi-exact modules (``spikec.nn.loihi``): its forward is Loihi 2's fixed-point
arithmetic, so the Lava target deploys these integers as they are and proves Lava's simulation bit-exact
against this very forward (``bit_exact_vs_source``).

Same shape as ``examples/digits`` (conv 1->8 3x3, LIF with subtract reset, conv 8->16, LIF with hard reset,
dense 256->10 read-out), with its float-only parts made integer: each BatchNorm is folded into the conv's
weights and the LIF's bias, and ``Conv2d(3x3) + AvgPool2d(2)`` is one ``Conv2d(4x4, stride 2)`` (the average
pool folded into the kernel). ``train.py`` builds it from the float demo's checkpoint and fine-tunes it.
The output is the read-out's integer sum per step; ``readout_scale`` (integer units per float logit) only
scales the training loss.

``small_chip`` is the chip-ready recipe: lif1 with a zero reset (Lava's own LIF; the subtract reset has no
Loihi 2 model), fine-tuned into that neuron (``train.py --lif1-reset zero``, ``checkpoint_chip.pt``), so that
every process of its Lava deployment is a standard Lava process (README.md here: what it costs).
"""
import torch
from torch import nn

import spikec.nn as snn
from spikec.nn import loihi

class DigitsLoihi(nn.Module):
    """``[T, B, 1, 8, 8]`` spikes -> ``[T, B, 10]`` integer read-out sums per step (class score: mean over T)."""

    input_shape = (1, 8, 8)
    steps = 8

    def __init__(self, lif1_reset: str = "subtract"):
        super().__init__()
        self.conv1 = loihi.Conv2d(1, 8, 3, padding=1)
        # "subtract": the float demo's soft reset, a SpikecLIF process (no Loihi 2 model); "zero": Lava's LIF
        self.lif1 = loihi.LIF(du=4095, dv=410, vth=64, channels=8, reset=lif1_reset)
        self.conv2 = loihi.Conv2d(8, 16, 4, stride=2, padding=1)
        self.lif2 = loihi.LIF(du=4095, dv=410, vth=64, channels=16, reset="zero")     # Lava's LIF process
        self.flat = snn.TimeDistributed(nn.Flatten())
        self.head = loihi.Dense(16 * 4 * 4, 10, bias=True)
        self.register_buffer("readout_scale", torch.tensor(1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        x = self.lif1(x)
        x = self.conv2(x)
        x = self.lif2(x)
        x = self.flat(x)
        return self.head(x)


def small() -> DigitsLoihi:
    return DigitsLoihi()


def small_chip() -> DigitsLoihi:
    """The chip-ready recipe: lif1 with a zero reset, so that every process is a standard Lava process (the
    weights of ``checkpoint_chip.pt``, fine-tuned into that neuron by ``train.py --lif1-reset zero``)."""
    return DigitsLoihi(lif1_reset="zero")


def encode(images: torch.Tensor, steps: int, seed: int) -> torch.Tensor:
    """Rate coding, as examples/digits: ``[B, 1, 8, 8]`` in [0, 1] -> Bernoulli spikes ``[T, B, 1, 8, 8]``."""
    g = torch.Generator().manual_seed(seed)
    p = torch.as_tensor(images, dtype=torch.float32).clamp(0, 1)
    return torch.bernoulli(p.expand(steps, *p.shape), generator=g)


def load_split():
    """The float demo's fixed digits split: ``(x_train, y_train, x_test, y_test)``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    as_x = lambda a: torch.tensor(a / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    as_y = lambda a: torch.tensor(a, dtype=torch.int64)
    return as_x(x_tr), as_y(y_tr), as_x(x_te), as_y(y_te)
