"""Synthetic event streams for the RIPE example: a bar moving in one of four directions.

No event data set can be downloaded here, so the example generates its own, deterministically
from a seed. Class 0 moves right, 1 left, 2 down, 3 up; the bar is perpendicular to its motion.
Each time bin holds event counts in two polarity channels: ON (0) = pixels the bar enters during
the bin, OFF (1) = pixels it leaves, plus sparse random noise events so that the task is not trivial.
"""
import numpy as np
import torch

CLASSES = ("right", "left", "down", "up")


def make_events(n: int, steps: int = 8, hw: tuple[int, int] = (32, 32), seed: int = 0, noise: float = 0.01):
    """``n`` samples: ``x`` float32 ``[steps, n, 2, H, W]`` event counts, ``y`` int64 ``[n]`` class labels."""
    rng = np.random.default_rng(seed)
    h, w = hw
    y = rng.integers(0, 4, n)
    width = rng.integers(2, 5, n)                       # bar thickness along the motion, 2-4 px
    speed = rng.uniform(1.0, 2.0, n)                    # px per step; rounding makes it move 1 or 2 px
    horizontal = y < 2
    motion_len = np.where(horizontal, w, h)             # frame size along the motion axis
    perp_len = np.where(horizontal, h, w)
    # Start so that the bar stays inside the frame for all steps + 1 positions.
    travel = np.ceil(speed * steps).astype(int)
    if (motion_len - width - travel < 0).any():
        raise ValueError(f"a {hw} frame is too small for {steps} steps of a bar moving up to 2 px per step")
    start = rng.integers(0, motion_len - width - travel + 1)
    length = np.round(perp_len * rng.uniform(0.6, 0.9, n)).astype(int)
    offset = rng.integers(0, perp_len - length + 1)

    # Bar occupancy at positions t = -1 .. steps-1 (the bar exists before the first bin), along each axis.
    pos = np.round(start[:, None] + speed[:, None] * np.arange(steps + 1)).astype(int)    # [n, steps+1]
    flip = ((y == 1) | (y == 3))[:, None]               # left/up: mirror the motion axis
    lo = np.where(flip, motion_len[:, None] - pos - width[:, None], pos)
    i = np.arange(max(h, w))
    along = (i >= lo[..., None]) & (i < (lo + width[:, None])[..., None])                # [n, steps+1, size]
    across = (i >= offset[:, None]) & (i < (offset + length)[:, None])                    # [n, size]
    frames = np.where(horizontal[:, None, None, None],
                      across[:, None, :h, None] & along[:, :, None, :w],                 # vertical bar, moves in x
                      along[:, :, :h, None] & across[:, None, None, :w])                 # horizontal bar, moves in y
    on = frames[:, 1:] & ~frames[:, :-1]
    off = frames[:, :-1] & ~frames[:, 1:]
    x = np.stack([on, off], axis=2).astype(np.float32)                                    # [n, steps, 2, H, W]
    x += rng.random(x.shape) < noise                    # noise events, count 1, both polarities
    return torch.from_numpy(np.ascontiguousarray(x.transpose(1, 0, 2, 3, 4))), torch.from_numpy(y.astype(np.int64))


def split(n_train: int = 1200, n_test: int = 400, steps: int = 8, hw: tuple[int, int] = (32, 32)):
    """The fixed split: ``(x_train, y_train, x_test, y_test)``; train uses seed 0, test seed 1."""
    return (*make_events(n_train, steps, hw, seed=0), *make_events(n_test, steps, hw, seed=1))
