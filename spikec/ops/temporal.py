"""Ops over time.

Array layouts:
  tdm       lam (C,)                 -- y_t = (1 + lam) x_t - lam x_{t-1}
  delay     no params; attr steps    -- y_t = x_{t - steps} (zeros before), on any time base
  step_bias bias (T, C)              -- y_t = x_t + bias[t]: a per-time-step bias schedule
"""
import torch

from spikec.ir.errors import BadInput
from spikec.ir.graph import TensorType
from spikec.ops.common import channel, float_only, sizes
from spikec.ops.registry import Param, define, need


def infer_tdm(node, ins):
    (t,) = ins
    need(node.params["lam"].shape == (t.shape[0],), node, f"lam must have shape ({t.shape[0]},)")
    return TensorType(t.shape)


def infer_step_bias(node, ins):
    (t,) = ins
    need(node.params["bias"].ndim == 2 and node.params["bias"].shape[1] == t.shape[0], node,
         f"bias schedule must be (T, {t.shape[0]}), got {node.params['bias'].shape}")
    return TensorType(t.shape)


def tdm(ctx, node, p, x):
    float_only(ctx, node)
    lam = channel(p["lam"], x.dim() - 1)
    # (1 + lam) x_t - lam x_{t-1}, with x_{-1} = 0, into one tensor: step 0 subtracts lam * 0 (+0 or -0, as the
    # literal expression does), the later steps lam x_{t-1}
    out = torch.mul(1 + lam, x)
    out[0].sub_(torch.mul(lam, torch.zeros_like(x[0])))
    if x.shape[0] > 1:
        out[1:].sub_(torch.mul(lam, x[:-1]))
    return out


def delay(ctx, node, p, x):
    k = min(node.attrs["steps"] * node.type.substeps, x.shape[0])
    return torch.cat([torch.zeros_like(x[:k]), x[: x.shape[0] - k]])


def step_bias(ctx, node, p, x):
    if x.shape[0] != p["bias"].shape[0]:
        raise BadInput(f"the bias schedule holds T={p['bias'].shape[0]} steps, the input has T={x.shape[0]}",
                       where=f"node {node.name!r}", remedy=f"give inputs of T = {p['bias'].shape[0]} steps")
    return torch.stack([x[t] + channel(p["bias"][t], x.dim() - 1) for t in range(x.shape[0])])


define("tdm", 1, infer_tdm, count=lambda n: sizes(n, "lam"), kernel=tdm, stateful=True, state=("prev",),
       params=(Param("lam", "(C,)", "weight of the temporal difference"),),
       doc="temporal difference y_t = (1 + lam) x_t - lam x_{t-1}")
define("delay", 1, lambda n, i: i[0], kernel=delay, stateful=True, time_base=True, state=("buffer",),
       doc="y_t = x_{t - steps}, zeros before; attr steps (physical steps, on any time base)")
define("step_bias", 1, infer_step_bias, count=lambda n: sizes(n, "bias"), kernel=step_bias, stateful=True,
       per_step=True, state=("step",), params=(Param("bias", "(T, C)", "the bias of each time step"),),
       doc="y_t = x_t + bias[t]: a per-time-step bias schedule")


# -- read-outs over time ------------------------------------------------------------------------------------------
def time_sum(ctx, node, p, x):
    """The running sum over the steps seen so far (divided by the run's T for a mean). Steps before the last are
    ``cumsum``; the last is torch's own ``x.sum(0)`` (torch's reduction order differs from a running add, measured:
    a few ulp), and a mean divides it by T after summing, as ``x.mean(0)`` does (measured bit-identical to
    ``x.sum(0) / T`` in float64 and float32), so the value read at the last step is the source's bit for bit."""
    if node.attrs.get("mean") or node.attrs.get("dtype"):
        float_only(ctx, node)
    source = x.to(torch.float32) if node.attrs.get("dtype") == "float32" else x  # the source's own precision
    out = torch.cumsum(source, 0)
    out[-1] = torch.sum(source, 0)
    return (out / x.shape[0] if node.attrs.get("mean") else out).to(x.dtype)


def time_max(ctx, node, p, x):
    """The running maximum over the steps seen so far (``torch.cummax``): a maximum rounds nothing, so the value
    at the last step is torch's ``x.max(0)`` / ``x.amax(0)`` bit for bit in any precision."""
    return torch.cummax(x, 0).values


# no one-step form (state ()): its output is the run's read-out at the last step, not a stream
define("time_max", 1, lambda n, i: TensorType(i[0].shape), kernel=time_max, stateful=True,
       doc="y_t = max_{s <= t} x_s: a max-over-time read-out (Norse's decoder: voltages.max(0)); attr read 'last': "
           "the model's output is this value at the last step ([B, ...], torch's x.max(0).values / x.amax(0))")
define("time_sum", 1, lambda n, i: TensorType(i[0].shape), kernel=time_sum, stateful=True,
       doc="y_t = sum_{s <= t} x_s (attr mean: divided by the run's T): a rate read-out over time; attr read "
           "'last': the model's output is this value at the last step ([B, ...], torch's x.sum(0) / x.mean(0)); attr dtype "
           "'float32': summed and divided in float32, as a source holding float32 values (snnTorch's spikes) does")
