"""Converters of the Xylo-exact training modules (``spikec.nn.xylo``) and their IR op ``xylo_lif``.

Every value these modules compute is an integer, so the IR holds them exactly in float64. One module is one
node: the op carries the population's weights, because Xylo saturates its 16-bit current after each source
(a ``linear`` in front would hand it the sum, which cannot repeat that).

Op::

  xylo_lif   input [T, B, C] event counts -> [T, B, N] spike counts (or a state read-out).
             params weight (N, C) and optional weight_rec (N, N): integer 8-bit weights, *not* shifted;
             dash_mem, dash_syn, threshold, bias: () or (N,) integers (bias already rounded and clipped).
             attrs role "hidden" (up to 31 spikes a step, recurrence allowed) | "output" (one spike a step, the
             input one step late), weight_shift, rec_shift (0..7), read "spikes" | "isyn" | "vmem" (the state
             after the step's reset). Kernel: ``spikec.nn.xylo.run`` in float64 (exact).

Each node records ``attrs["xylo"]`` so that the Xylo target deploys these integers as they are
(``spikec.targets.xylo.exact``).
"""
import torch

from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only, multi_step_only
from spikec.frontend.registry import refuse, register_converter
from spikec.nn import xylo
from spikec.ops import PER_CHANNEL, Param, define, register_kernel
from spikec.ops.common import per_channel, sizes
from spikec.ops.registry import need

NEURON_PARAMS = ("dash_mem", "dash_syn", "threshold", "bias")
ROLES = {"hidden": xylo.HIDDEN_MAX_SPIKES, "output": xylo.OUTPUT_MAX_SPIKES}
DOCS = {"weight": "input weights, 8-bit integers (the chip adds weight << weight_shift)",
        "weight_rec": "recurrent weights (hidden only), 8-bit integers, << rec_shift",
        "dash_mem": "membrane decay 1 - 2**-dash_mem (0..15)", "dash_syn": "current decay 1 - 2**-dash_syn (0..15)",
        "threshold": "threshold (1..32767): floor(Vmem / threshold) spikes", "bias": "membrane bias, 16-bit"}


def _infer(node, ins):
    (t,) = ins
    need(len(t.shape) == 1 and t.substeps == 1, node, f"xylo_lif takes [T, B, C] events, got {t.describe()}")
    need("weight" in node.params and node.params["weight"].ndim == 2
         and node.params["weight"].shape[1] == t.shape[0], node, f"weight must be (N, {t.shape[0]})")
    n = node.params["weight"].shape[0]
    role = node.attrs.get("role")
    need(role in ROLES, node, f"role must be one of {tuple(ROLES)}, got {role!r}")
    if "weight_rec" in node.params:
        need(role == "hidden" and node.params["weight_rec"].shape == (n, n), node,
             f"weight_rec must be ({n}, {n}) on a hidden population")
    per_channel(node, TensorType((n,)), NEURON_PARAMS)
    need(all(k in node.params for k in NEURON_PARAMS), node, f"xylo_lif needs params {NEURON_PARAMS}")
    read = node.attrs.get("read", "spikes")
    need(read in xylo.READS, node, f"read must be one of {xylo.READS}, got {read!r}")
    if read != "spikes":
        return TensorType((n,))
    return TensorType((n,), "binary") if ROLES[role] == 1 else TensorType((n,), "integer", ROLES[role])


def _kernel(node, p, x):
    """``spikec.nn.xylo.run`` in float64: exact (every value is an integer below 2^53)."""
    float_only(node, x)
    a, n = node.attrs, p["weight"].shape[0]
    w_in = p["weight"].to(x.dtype) * 2.0 ** a["weight_shift"]
    w_rec = p["weight_rec"].to(x.dtype) * 2.0 ** a.get("rec_shift", 0) if "weight_rec" in p else None
    params = {k: torch.broadcast_to(p[k].to(x.dtype), (n,)) for k in NEURON_PARAMS}
    params["max_spikes"] = ROLES[a["role"]]
    s, isyn, vmem = xylo.run(x, w_in, w_rec, params, a["role"] == "output")
    return {"spikes": s, "isyn": isyn, "vmem": vmem}[a.get("read", "spikes")]


def _count(node) -> int:
    return sizes(node, "weight", "weight_rec", *NEURON_PARAMS) if node.attrs.get("read", "spikes") == "spikes" else 0


define("xylo_lif", 1, _infer, count=_count, stateful=True, neuron=True,
       params=(Param("weight", "(N, C)", DOCS["weight"]),
               Param("weight_rec", "(N, N)", DOCS["weight_rec"], required=False),
               *(Param(k, PER_CHANNEL, DOCS[k]) for k in NEURON_PARAMS)),
       doc="a SynSense Xylo population (spikec.nn.xylo): its 8-bit weights, bit-shift decays, 16-bit saturating "
           "states, several spikes a step, subtractive reset; attrs role, weight_shift, rec_shift, read")
register_kernel("xylo_lif", _kernel)


def _np(t: torch.Tensor):
    return t.detach().double().cpu().numpy()


def population(ctx, m, name, x):
    multi_step_only(ctx, m, name)
    if m.return_state:
        refuse(name, m, "return_state=True returns (spikes, isyn, vmem); the converter maps the spikes only",
               "trace the module with return_state=False")
    _check_buffers(name, m)
    role = "output" if isinstance(m, xylo.Output) else "hidden"
    params = {"weight": _np(xylo.integer_weights(m.weight, 0)), "dash_mem": _np(m.dash_mem),
              "dash_syn": _np(m.dash_syn), "threshold": _np(m.threshold), "bias": _np(xylo.integer_bias(m.bias))}
    attrs = {"role": role, "weight_shift": m.weight_shift, "xylo": {"kind": role}}
    if getattr(m, "weight_rec", None) is not None:
        params["weight_rec"] = _np(xylo.integer_weights(m.weight_rec, 0))
        attrs["rec_shift"] = m.rec_shift
    return ctx.emit(name, "xylo_lif", [x], attrs, params, scope=name)


def _check_buffers(name, m):
    """The module's checks again on its buffers as loaded: ``load_state_dict`` writes a checkpoint's values past
    them (a threshold of 0.5 would become 0 on the chip)."""
    n = m.weight.shape[0]
    limits = {"dash_mem": (0, xylo.DASH_MAX), "dash_syn": (0, xylo.DASH_MAX), "threshold": (1, xylo.STATE_MAX)}
    for key, (lo, hi) in limits.items():
        try:
            xylo._int_buffer(getattr(m, key), key, lo, hi, n)
        except ValueError as e:
            refuse(name, m, f"{e} (as loaded: a checkpoint's value)", f"give {key} integers in [{lo}, {hi}] "
                   "(spikec.nn.xylo keeps them so while training; the checkpoint was edited or is of another model)")


register_converter(xylo.Hidden, population)
register_converter(xylo.Output, population)
