"""Keyword spotting on Xylo: the network as an snnTorch user writes it, sized for Xylo Audio 2.

16 input channels (Xylo Audio's 16 band-pass filters, one spike train each), a recurrent hidden layer of 32
``RLeaky`` neurons with a linear recurrence, 4 ``Leaky`` output neurons (one per keyword; Xylo takes at most 8).
snnTorch's defaults otherwise: subtract reset, threshold 1. The decays are ``1 - 2**-k`` (0.875 = 1 - 2**-3,
0.75 = 1 - 2**-2), the ones Xylo's bit shifts hold exactly. ``train.py`` trained the checkpoint briefly with
snnTorch's surrogate gradient (every layer fires); ``inputs.npz`` holds keywords it was not trained on.

The CLI loads this file by path (``model.py:kws``); it imports only ``torch``, ``numpy`` and ``snntorch``.
"""
import numpy as np
import snntorch as snn
import torch
from torch import nn

CHANNELS, HIDDEN, KEYWORDS, STEPS = 16, 32, 4, 40


def kws() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(CHANNELS, HIDDEN),
                         snn.RLeaky(beta=0.875, linear_features=HIDDEN, init_hidden=True),
                         nn.Linear(HIDDEN, KEYWORDS),
                         snn.Leaky(beta=0.75, init_hidden=True))


def keywords(n: int, seed: int, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic spoken keywords as band events: ``([T, n, 16] spikes float32, [n] labels)``.

    Keyword 0 sweeps up through the bands, 1 sweeps down, 2 is a low-band burst then a high one, 3 the reverse;
    each sample is jittered in time and band and carries background events.
    """
    g = np.random.default_rng(seed)
    labels = g.integers(0, KEYWORDS, n)
    t = np.arange(steps)[:, None]
    band = np.arange(CHANNELS)[None, :]
    x = np.empty((steps, n, CHANNELS), np.float32)
    for i, k in enumerate(labels):
        shift, spread = g.uniform(-4, 4), g.uniform(1.5, 2.5)
        if k < 2:
            centre = (t - 5 - shift) * (CHANNELS / (steps - 10))
            centre = centre if k == 0 else CHANNELS - 1 - centre
            rate = 0.6 * np.exp(-((band - centre) ** 2) / (2 * spread ** 2))
        else:
            low, high = (band < 6), (band > 9)
            first, second = (low, high) if k == 2 else (high, low)
            early = (t > 4 + shift) & (t < 18 + shift)
            late = (t > 22 + shift) & (t < 36 + shift)
            rate = 0.45 * (early & first) + 0.45 * (late & second)
        x[:, i] = g.random((steps, CHANNELS)) < rate + 0.02
    return x, labels
