"""TTFS example: a ReLU MLP for scikit-learn digits (64 -> 64 -> 32 -> 10), trained as an ordinary ANN.

``spikec compile examples/ttfs/mlp.py:mlp --coding ttfs --target none -o OUT`` converts it by TTFS timing
assignment: the ReLU layers become B1 layers, the logits an R-TTFS layer (signed). The factory loads the
shipped checkpoint ``mlp.pt`` (``--weights mlp.pt`` loads the same). Train: ``train.py --model mlp``.
"""
import os

import torch
from torch import nn

from digits_data import DigitsData, load_checkpoint


class DigitsMLP(nn.Module, DigitsData):
    input_shape = (64,)   # one step of one sample
    steps = 1             # TTFS: one inference per step

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(64, 64), nn.Linear(64, 32), nn.Linear(32, 10)
        self.relu1, self.relu2 = nn.ReLU(), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # [T, B, 64] -> [T, B, 10]
        return self.out(self.relu2(self.fc2(self.relu1(self.fc1(x)))))


def mlp(pretrained: bool = True) -> DigitsMLP:
    return load_checkpoint(DigitsMLP(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.pt"),
                           pretrained)
