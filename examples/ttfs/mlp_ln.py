"""TTFS example: an MLP with LayerNorm for scikit-learn digits (64 -> 64 -> LayerNorm -> ReLU -> 32 -> 10).

The LayerNorm has no exact TTFS form: it maps onto seven TTFS sub-layers whose 1/sqrt is a fitted
two-layer ReLU network (spikec/codings/ttfs/layernorm.py). The result is APPROXIMATE and the report says so,
with the measured error. ``spikec compile examples/ttfs/mlp_ln.py:mlp_ln --coding ttfs --target none -o OUT``.
"""
import os

import torch
from torch import nn

import spikec.codings.ttfs  # noqa: F401  (registers the nn.LayerNorm converter)
from digits_data import DigitsData, load_checkpoint


class DigitsLayerNormMLP(nn.Module, DigitsData):
    input_shape = (64,)
    steps = 1

    def __init__(self):
        super().__init__()
        self.fc1, self.norm = nn.Linear(64, 64), nn.LayerNorm(64)
        self.fc2, self.out = nn.Linear(64, 32), nn.Linear(32, 10)
        self.relu1, self.relu2 = nn.ReLU(), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # [T, B, 64] -> [T, B, 10]
        return self.out(self.relu2(self.fc2(self.relu1(self.norm(self.fc1(x))))))


def mlp_ln(pretrained: bool = True) -> DigitsLayerNormMLP:
    return load_checkpoint(DigitsLayerNormMLP(),
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp_ln.pt"), pretrained)
