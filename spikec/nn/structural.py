"""Structural modules: per-step application, RepConv, window sum."""
import torch
import torch.nn.functional as F
from torch import nn

from spikec.nn._common import check_multistep


class TimeDistributed(nn.Sequential):
    """Apply per-step modules (Conv2d, BatchNorm, pooling, ...) to ``[T, B, ...]`` by merging T and B."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "TimeDistributed", min_dim=2)
        t, b = x.shape[:2]
        y = super().forward(x.flatten(0, 1))
        return y.reshape(t, b, *y.shape[1:])


def _conv_bn(c_in, c_out, kernel, stride, padding, eps):
    return nn.Sequential(nn.Conv2d(c_in, c_out, kernel, stride, padding, bias=False),
                         nn.BatchNorm2d(c_out, eps=eps))


class RepConv(nn.Module):
    """Training-time multi-branch convolution (semantics.md section 2): sum of BN-terminated branches.

    Branches: 3x3 (pad 1), 1x1, 1x3 (pad 0,1), 3x1 (pad 1,0), 1x1 -> 3x3 (``seq``), identity (BN only)
    and avg-pool 3x3 (stride 1, pad 1). Identity and avg-pool need ``c_in == c_out`` and stride 1;
    by default they are present exactly then. ``seq_bias`` and ``avgpool_count_include_pad=False``
    exist so that the fusion pass's refusals can be exercised.
    """

    def __init__(self, c_in: int, c_out: int, stride: int = 1, identity=None, avgpool=None, eps=1e-5,
                 seq_bias=False, avgpool_count_include_pad=True):
        super().__init__()
        square = c_in == c_out and stride == 1
        identity = square if identity is None else identity
        avgpool = square if avgpool is None else avgpool
        if (identity or avgpool) and not square:
            raise ValueError("RepConv identity/avg-pool branches need c_in == c_out and stride 1")
        self.conv3x3 = _conv_bn(c_in, c_out, 3, stride, 1, eps)
        self.conv1x1 = _conv_bn(c_in, c_out, 1, stride, 0, eps)
        self.conv1x3 = _conv_bn(c_in, c_out, (1, 3), stride, (0, 1), eps)
        self.conv3x1 = _conv_bn(c_in, c_out, (3, 1), stride, (1, 0), eps)
        self.seq = nn.Sequential(nn.Conv2d(c_in, c_out, 1, 1, 0, bias=seq_bias),
                                 nn.Conv2d(c_out, c_out, 3, stride, 1, bias=False),
                                 nn.BatchNorm2d(c_out, eps=eps))
        self.identity = nn.BatchNorm2d(c_out, eps=eps) if identity else None
        self.avgpool = nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=avgpool_count_include_pad),
                                     nn.BatchNorm2d(c_out, eps=eps)) if avgpool else None

    def branches(self) -> list[nn.Module]:
        names = ("conv3x3", "conv1x1", "conv1x3", "conv3x1", "seq", "identity", "avgpool")
        return [getattr(self, n) for n in names if getattr(self, n) is not None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "RepConv", min_dim=5)
        t, b = x.shape[:2]
        flat = x.flatten(0, 1)
        y = None
        for branch in self.branches():
            out = branch(flat)
            y = out if y is None else y + out
        return y.reshape(t, b, *y.shape[1:])


class WindowSum(nn.Module):
    """Box sum over a ``k x k`` window (optionally dilated), zero padding, same spatial size.

    A depthwise convolution with an all-ones kernel; accumulate-only on spike inputs.
    """

    def __init__(self, kernel_size: int = 3, dilation: int = 1):
        super().__init__()
        if kernel_size % 2 != 1 or kernel_size < 1 or dilation < 1:
            raise ValueError("WindowSum needs an odd kernel_size >= 1 and dilation >= 1")
        self.kernel_size, self.dilation = int(kernel_size), int(dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "WindowSum", min_dim=5)
        t, b, c = x.shape[:3]
        k = self.kernel_size
        w = torch.ones(c, 1, k, k, dtype=x.dtype, device=x.device)
        pad = self.dilation * (k - 1) // 2
        y = F.conv2d(x.flatten(0, 1), w, padding=pad, dilation=self.dilation, groups=c)
        return y.reshape(t, b, *y.shape[1:])

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}"
