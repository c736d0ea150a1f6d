"""Helpers shared by the reference modules."""
import torch


def as_param_tensor(value, name: str) -> torch.Tensor:
    """A scalar or 1-D per-channel value as a float tensor (validated, never asserted)."""
    t = torch.as_tensor(value, dtype=torch.get_default_dtype()).detach().clone()
    if t.dim() > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D per-channel vector, got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite")
    return t


def per_channel(p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Broadcast a scalar or per-channel vector against one step ``x`` of shape ``[B, C, ...]``."""
    if p.dim() == 0:
        return p.to(x.dtype)
    return p.to(x.dtype).view(1, -1, *([1] * (x.dim() - 2)))


def check_multistep(x: torch.Tensor, who: str, min_dim: int = 3) -> None:
    if x.dim() < min_dim:
        raise ValueError(f"{who} expects a multi-step tensor [T, B, ...] with at least {min_dim} dims, "
                         f"got shape {tuple(x.shape)}")
