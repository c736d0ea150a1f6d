"""Modules with a direct TTFS form that torch.nn lacks."""
import torch
import torch.nn.functional as F
from torch import nn


class ShiftReLU(nn.Module):
    """``max(x, -shift)`` = ``relu(x + shift) - shift``: the signed activation of reference-based TTFS.

    Written so that torch.fx traces it into ``scale(+shift) -> relu -> scale(-shift)``; the TTFS pass
    recognises that pattern and maps it onto an R-TTFS layer whose window's lower end is the shift.
    """

    def __init__(self, shift: float = 1.0):
        super().__init__()
        if not shift > 0:
            raise ValueError(f"shift must be > 0, got {shift}")
        self.shift = float(shift)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.shift) + (-self.shift)

    def extra_repr(self) -> str:
        return f"shift={self.shift}"
