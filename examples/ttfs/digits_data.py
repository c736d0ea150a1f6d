"""The scikit-learn digits split shared by the TTFS examples, and the data hooks the TTFS compiler reads.

Same split as ``examples/digits`` (25% test, ``random_state=0``, stratified): 1347 training and 450 test
images, intensities scaled to [0, 1]. TTFS models see one step: inputs are ``[T=1, B, ...]``.
"""
import os

import numpy as np


def load_split(flat: bool):
    """``(x_train, y_train, x_test, y_test)``; x float64 ``[N, 64]`` (flat) or ``[N, 1, 8, 8]`` in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    shape = (-1, 64) if flat else (-1, 1, 8, 8)
    return (x_tr / 16.0).reshape(shape), y_tr.astype(np.int64), (x_te / 16.0).reshape(shape), y_te.astype(np.int64)


class DigitsData:
    """Mixin: ``calibration_data()`` (the training images) and ``evaluation_data()`` (the test split).

    ``spikec.targets.ttfs.compile_ttfs`` calibrates the per-layer TTFS scales on the first and reports ANN vs
    TTFS accuracy on the second. Subclasses set ``input_shape``.
    """

    def _split(self):
        return load_split(flat=len(self.input_shape) == 1)

    def calibration_data(self) -> np.ndarray:
        x_tr, _, _, _ = self._split()
        return x_tr[None]

    def evaluation_data(self):
        _, _, x_te, y_te = self._split()
        return x_te[None], y_te


def load_checkpoint(model, path: str, pretrained: bool):
    """Load the shipped ``state_dict`` at ``path`` into ``model`` when ``pretrained`` (and it exists)."""
    if pretrained and os.path.exists(path):
        import torch
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model
