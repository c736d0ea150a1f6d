"""Data for the SDNA example: digits upscaled to 16x16 (static, T = 1) and synthetic moving-bar events (T = 4).

No data set can be downloaded here. Static: scikit-learn's ``load_digits`` (8x8, intensities 0..16) scaled
to [0, 1] and upscaled bilinearly to 16x16, fixed stratified 75/25 split. Event: ``make_events`` of the RIPE
example (examples/ripe/data.py, loaded by path) at 16x16 with 4 motion classes, train seed 0, test seed 1.
"""
import importlib.util
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
EVENT_HW = (16, 16)
EVENT_STEPS = 4
NOISE = 0.05  # noise events per pixel, polarity and bin (more than the RIPE default 0.01)


def _ripe_data():
    path = os.path.join(os.path.dirname(HERE), "ripe", "data.py")
    spec = importlib.util.spec_from_file_location("spikec_examples_ripe_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def static_split(size: int = 16):
    """``(x_train, y_train, x_test, y_test)``; x float32 ``[1, N, 1, size, size]`` in [0, 1] (T = 1), y int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)

    def as_x(a):
        img = torch.tensor(a / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
        img = F.interpolate(img, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1)
        return img.unsqueeze(0)

    as_y = lambda a: torch.tensor(a, dtype=torch.int64)
    return as_x(x_tr), as_y(y_tr), as_x(x_te), as_y(y_te)


def event_split(n_train: int = 1200, n_test: int = 400, steps: int = EVENT_STEPS, hw=EVENT_HW, noise: float = NOISE):
    """``(x_train, y_train, x_test, y_test)``; x float32 ``[steps, N, 2, H, W]`` event counts, y int64 in 0..3."""
    make_events = _ripe_data().make_events
    return (*make_events(n_train, steps, hw, seed=0, noise=noise), *make_events(n_test, steps, hw, seed=1, noise=noise))
