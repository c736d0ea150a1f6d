"""Heaviside with H(0) = 1 forward and a smooth surrogate gradient backward."""
import torch


class _Heaviside(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, slope):
        ctx.save_for_backward(x)
        ctx.slope = slope
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        # fast-sigmoid surrogate: d/dx ~ 1 / (1 + slope |x|)^2
        return grad / (1.0 + ctx.slope * x.abs()) ** 2, None


def heaviside(x: torch.Tensor, slope: float = 5.0) -> torch.Tensor:
    """``[x >= 0]`` (exact forward) with a fast-sigmoid surrogate gradient."""
    return _Heaviside.apply(x, slope)


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, x):
        return q

    @staticmethod
    def backward(ctx, grad):
        return None, grad


def straight_through(quantized: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Forward the exact ``quantized`` value; pass the gradient of ``x`` through unchanged."""
    return _StraightThrough.apply(quantized, x)
