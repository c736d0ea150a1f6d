"""Converters for spike-driven neighborhood attention (``spikec.nn.sdna``), registered when this module is imported
(``spikec.frontend.tracing`` imports it).

* ``SDNALinear`` is decomposed into existing IR ops, in the order ``spikec.nn.sdna.sdna_linear`` computes:
  ``{name}.kv = mul(k, v)`` -> ``{name}.window = windowsum`` -> ``{name}.mean = scale(a=1/k^2, b=0)``
  -> [``{name}.gate_bn = batchnorm``] -> ``{name}.gate = intfire`` -> ``{name} = mul(q, gate)``.
  The other passes (BN folding into the gate threshold, virtual-step unrolling, the cost model) see
  ordinary nodes; the window sum of integer spikes is an integer, accumulate-only tensor.
* ``SDNAPairwise`` becomes one new op ``sdna_pairwise`` (inputs ``q, k, v``), because its ``k*k``
  neurons per pixel and channel have no expression in the existing ops:
    params  ``threshold, beta, alpha``: () or (C,)  -- the pair neurons (semantics.md 1.2)
            ``bn_gamma, bn_beta, bn_mean, bn_var``: (C,), all or none  -- the optional gate BN
    attrs   ``kernel, dilation, max_spikes, rounding``, and ``bn_eps`` with the gate BN
  Output kind: real (the ``1/k^2`` makes it a multiple of ``1/k^2``, not an integer). Stateful (one neuron
  state per (pixel, window position, channel)). Not marked synaptic: the products ``Q_i K_j`` and
  ``a_ij V_j`` are data-dependent (no static weight), and with integer spikes they are not AND
  coincidences (passes.md). Its kernel calls ``spikec.nn.sdna.sdna_pairwise``, the function the module runs.
  Deployed-parameter count: the gate BN's ``gamma, beta`` (as for a ``batchnorm`` node).
"""
import torch.nn.functional as F

from spikec.ir.errors import IRError
from spikec.ir.graph import TensorType
from spikec.frontend.registry import refuse, register_converter
from spikec.frontend.torch_modules import bn_statistics
from spikec.nn.sdna import SDNALinear, SDNAPairwise, sdna_pairwise, window_scale
from spikec.ops import decay_params, define, register_kernel
from spikec.ops.common import per_channel as _per_channel, sizes as _sizes
from spikec.ops.neurons import INTFIRE
from spikec.ops.registry import need as _need

BN_PARAMS = ("bn_gamma", "bn_beta", "bn_mean", "bn_var")
NEURON_PARAMS = ("threshold", "beta", "alpha")


def _multi_step_only(ctx, module, name):
    if ctx.per_step:
        refuse(name, module, "SDNA is stateful (its neurons run over t); inside TimeDistributed torch would "
               "mistake T*B for time", "apply it to the [T, B, C, H, W] tensors, outside spikec.nn.TimeDistributed")


def _gate_bn_params(m, name):
    missing = "the gate BatchNorm has no running statistics, so no inference form"
    return bn_statistics(m.gate_bn, name, m, missing), float(m.gate_bn.eps)


def _gate_attrs(m):
    return {"max_spikes": m.gate.max_spikes, "rounding": m.gate.rounding}


def _gate_params(m):
    return {"beta": m.gate.beta, "alpha": m.gate.alpha, "threshold": m.gate.threshold}


def sdna_linear(ctx, m: SDNALinear, name, q, k, v):
    """Linear SDNA as existing ops, in the order of ``spikec.nn.sdna.sdna_linear``."""
    _multi_step_only(ctx, m, name)
    bn = _gate_bn_params(m, name) if m.gate_bn is not None else None   # refuse before emitting anything
    kv = ctx.emit(f"{name}.kv", "mul", [k, v], scope=name)
    window = ctx.emit(f"{name}.window", "windowsum", [kv], {"kernel": m.kernel_size, "dilation": m.dilation},
                      scope=name)
    x = ctx.emit(f"{name}.mean", "scale", [window], {"a": window_scale(m.kernel_size), "b": 0.0}, scope=name)
    if bn is not None:
        params, eps = bn
        x = ctx.emit(f"{name}.gate_bn", "batchnorm", [x], {"eps": eps}, params, scope=name)
    gate = ctx.emit(f"{name}.gate", INTFIRE, [x], _gate_attrs(m), _gate_params(m), scope=name)
    return ctx.emit(name, "mul", [q, gate], scope=name)


def sdna_pairwise_converter(ctx, m: SDNAPairwise, name, q, k, v):
    _multi_step_only(ctx, m, name)
    attrs = {"kernel": m.kernel_size, "dilation": m.dilation, **_gate_attrs(m)}
    params = _gate_params(m)
    if m.gate_bn is not None:
        bn, eps = _gate_bn_params(m, name)
        params.update({f"bn_{k_}": p for k_, p in bn.items()})
        attrs["bn_eps"] = eps
    return ctx.emit(name, "sdna_pairwise", [q, k, v], attrs, params, scope=name)


# -- the sdna_pairwise op ----------------------------------------------------------------------
def _infer_pairwise(node, ins):
    q, k, v = ins
    _need(len(q.shape) == 3 and q.shape == k.shape == v.shape, node,
          f"q, k and v must share one (C, H, W) shape, got {q.shape}, {k.shape}, {v.shape}")
    a = node.attrs
    _need(isinstance(a.get("kernel"), int) and a["kernel"] >= 1 and a["kernel"] % 2 == 1, node,
          f"kernel must be an odd integer >= 1, got {a.get('kernel')!r}")
    _need(isinstance(a.get("dilation"), int) and a["dilation"] >= 1, node,
          f"dilation must be an integer >= 1, got {a.get('dilation')!r}")
    _need(isinstance(a.get("max_spikes"), int) and a["max_spikes"] >= 1, node,
          f"max_spikes must be an integer >= 1, got {a.get('max_spikes')!r}")
    _need(a.get("rounding") in ("round", "floor"), node, f"rounding must be 'round' or 'floor', got {a.get('rounding')!r}")
    _per_channel(node, q, NEURON_PARAMS)
    present = [n for n in BN_PARAMS if n in node.params]
    _need(len(present) in (0, len(BN_PARAMS)), node, f"the gate BN needs all of {BN_PARAMS}, got {present}")
    for n in present:
        _need(node.params[n].shape == (q.shape[0],), node,
              f"{n} has shape {node.params[n].shape}, expected ({q.shape[0]},)")
    _need(not present or "bn_eps" in a, node, "a gate BN needs attr bn_eps")
    return TensorType(q.shape)  # real: sums of integer products times 1/k^2


def sdna_pairwise_kernel(node, p, q, k, v):
    """``spikec.nn.sdna.sdna_pairwise`` with the gate BN in inference form; returns (output, margins)."""
    if not q.is_floating_point():
        raise IRError("op sdna_pairwise has no exact integer kernel (its output is a multiple of 1/k^2)",
                      where=f"node {node.name!r}", remedy="run this graph in float64")
    a = node.attrs
    gate_bn = None
    if "bn_gamma" in p:
        gate_bn = lambda s: F.batch_norm(s, p["bn_mean"], p["bn_var"], p["bn_gamma"], p["bn_beta"], False, 0.0,
                                         a["bn_eps"])
    return sdna_pairwise(q, k, v, a["kernel"], a["dilation"], p["threshold"], p["beta"], p["alpha"],
                         a["max_spikes"], a["rounding"], gate_bn, margins=True)


define("sdna_pairwise", 3, _infer_pairwise, NEURON_PARAMS, BN_PARAMS,
       count=lambda n: _sizes(n, "bn_gamma", "bn_beta"), stateful=True, neuron=True,
       decay=decay_params("beta", zero_ok=True))   # the pair neurons (an intfire each)
register_kernel("sdna_pairwise", sdna_pairwise_kernel)
register_converter(SDNALinear, sdna_linear)
register_converter(SDNAPairwise, sdna_pairwise_converter)
