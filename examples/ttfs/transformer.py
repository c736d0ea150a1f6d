"""TTFS example (models.md 4(b)): one transformer block in the reference-based TTFS scheme, on digits.

Tokens: the 8 rows of a digit, each pixel thresholded (> 8 of 16), so a row is one of 256 patterns;
token ``i`` is the one-hot of its pattern (256) next to the one-hot of its position (8): two spikes at a
fixed time per token (B1 input: an active entry spikes at the window start, the others stay silent).

    x = Embed(tokens)                                       linear, no bias (pattern + position rows)
    x = x + Proj(relu(Q K^T / sqrt(d)) V / N)               Q K^T and (.) V: the query (the scores) act as
                                                           synaptic weights of the key (value) spikes
    x = x + MLP(LN(x))                                      ReLU MLP; dropout is the identity at inference
    logits = Head(Pool(x))                                  learned pooling over tokens

with ``LN`` before attention and MLP (pre-norm), 7 TTFS sub-layers each (APPROXIMATE: fitted 1/sqrt).
Softmax-free (a ReLU on the scores): softmax has no TTFS form. ``d = 16``, ``N = 8``.
``spikec compile examples/ttfs/transformer.py:transformer --coding ttfs --target none -o OUT``.
"""
import os

import numpy as np
import torch
from torch import nn

import spikec.codings.ttfs  # noqa: F401  (registers the nn.LayerNorm converter)
from digits_data import load_checkpoint, load_split

N_TOKENS, PATTERNS, D = 8, 256, 16


def tokens(images: np.ndarray) -> np.ndarray:
    """``[B, 64]`` intensities in [0, 1] -> one-hot tokens ``[B, 8, 256 + 8]`` (float64)."""
    bits = (np.asarray(images).reshape(-1, 8, 8) > 0.5).astype(np.int64)
    pattern = bits @ (1 << np.arange(8))
    out = np.zeros((bits.shape[0], N_TOKENS, PATTERNS + N_TOKENS))
    b, rows = np.arange(bits.shape[0])[:, None], np.arange(N_TOKENS)[None, :]
    out[b, rows, pattern] = 1.0
    out[b, rows, PATTERNS + rows] = 1.0
    return out


class DigitsTransformer(nn.Module):
    input_shape = (N_TOKENS, PATTERNS + N_TOKENS)
    steps = 1

    def __init__(self, d=D, hidden=4 * D):
        super().__init__()
        self.embed = nn.Linear(PATTERNS + N_TOKENS, d, bias=False)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.relu_s, self.relu_h = nn.ReLU(), nn.ReLU()
        self.drop = nn.Dropout(0.1)
        self.pool = nn.Linear(N_TOKENS, 1)
        self.head = nn.Linear(d, 10)
        self.scale = 1.0 / float(np.sqrt(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # [T, B, 8, 264] -> [T, B, 10]
        x = self.embed(x)
        h = self.ln1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        scores = self.relu_s(q @ k.transpose(-2, -1) * self.scale)
        x = x + self.drop(self.proj(scores @ v * (1.0 / N_TOKENS)))
        x = x + self.drop(self.fc2(self.relu_h(self.fc1(self.ln2(x)))))
        pooled = self.pool(x.transpose(-2, -1))               # [T, B, d, 1]: a learned mean over tokens
        return self.head(torch.flatten(pooled, 2))

    def calibration_data(self) -> np.ndarray:
        x_tr, _, _, _ = load_split(flat=True)
        return tokens(x_tr)[None]

    def evaluation_data(self):
        _, _, x_te, y_te = load_split(flat=True)
        return tokens(x_te)[None], y_te


def transformer(pretrained: bool = True) -> DigitsTransformer:
    return load_checkpoint(DigitsTransformer(),
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer.pt"), pretrained)
