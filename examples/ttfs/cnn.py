"""TTFS example: a small ReLU CNN for scikit-learn digits, trained as an ordinary ANN.

conv 3x3 (1->8) ReLU avgpool 2 -> conv 3x3 (8->16) ReLU avgpool 2 -> linear 64 -> 32 ReLU -> linear 10.
Average pooling and flatten fold into the synapses of the next TTFS layer (they are linear).
``spikec compile examples/ttfs/cnn.py:cnn --coding ttfs --target none -o OUT``; train: ``train.py --model cnn``.
"""
import os

import torch
from torch import nn

import spikec.nn as snn
from digits_data import DigitsData, load_checkpoint


class DigitsCNN(nn.Module, DigitsData):
    input_shape = (1, 8, 8)
    steps = 1

    def __init__(self):
        super().__init__()
        self.block1 = snn.TimeDistributed(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2))
        self.block2 = snn.TimeDistributed(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2))
        self.head = snn.TimeDistributed(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # [T, B, 1, 8, 8] -> [T, B, 10]
        return self.head(self.block2(self.block1(x)))


def cnn(pretrained: bool = True) -> DigitsCNN:
    return load_checkpoint(DigitsCNN(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "cnn.pt"),
                           pretrained)
