"""Demo model: a small convolutional SNN for scikit-learn's 8x8 digits, fed rate-coded spikes.

The compiler CLI loads this file by path (``model.py:small``), so it imports only
``torch``, ``sklearn`` and ``spikec`` and keeps the factory argument-free.
"""
import torch
from torch import nn

import spikec.nn as snn


class DigitsSNN(nn.Module):
    """``[T, B, 1, 8, 8]`` spikes -> ``[T, B, 10]`` logits per step (class score: mean over T)."""

    input_shape = (1, 8, 8)  # one step of one sample; the CLI's default input shape
    steps = 8                # the T the checkpoint was trained with; the CLI's default T

    def __init__(self):
        super().__init__()
        self.conv1 = snn.TimeDistributed(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.lif1 = snn.LIF(beta=0.9, threshold=1.0, reset="subtract")
        self.conv2 = snn.TimeDistributed(nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                                         nn.AvgPool2d(2))
        # Hard reset here, soft reset in lif1: the demo exercises both reset modes.
        self.lif2 = snn.LIF(beta=0.9, threshold=1.0, reset="zero")
        self.head = snn.TimeDistributed(nn.Flatten(), nn.Linear(16 * 4 * 4, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Plain sequential calls, so torch.fx traces each child as one leaf.
        x = self.conv1(x)
        x = self.lif1(x)
        x = self.conv2(x)
        x = self.lif2(x)
        x = self.head(x)
        return x


def small() -> DigitsSNN:
    return DigitsSNN()


def encode(images: torch.Tensor, steps: int, seed: int) -> torch.Tensor:
    """Rate coding: ``[B, 1, 8, 8]`` intensities in [0, 1] -> Bernoulli spikes ``[T, B, 1, 8, 8]`` float32.

    A private generator makes the spikes depend only on ``seed``, not on the global RNG state.
    """
    g = torch.Generator().manual_seed(seed)
    p = torch.as_tensor(images, dtype=torch.float32).clamp(0, 1)
    return torch.bernoulli(p.expand(steps, *p.shape), generator=g)


def load_split():
    """The fixed digits split: ``(x_train, y_train, x_test, y_test)``, x float32 ``[N, 1, 8, 8]`` in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    as_x = lambda a: torch.tensor(a / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    as_y = lambda a: torch.tensor(a, dtype=torch.int64)
    return as_x(x_tr), as_y(y_tr), as_x(x_te), as_y(y_te)
