"""The framework-exact IR ops of snnTorch's neurons: ``lif_snntorch`` (``Leaky``), ``synaptic_snntorch``
(``Synaptic``, ``RSynaptic``), ``rleaky_snntorch`` (``RLeaky``) and ``alpha_snntorch`` (``Alpha``). Their float64
kernels repeat snnTorch 1.0's step (``snntorch/_neurons/*.py``) in its order of operations, so a float64 run of
the module and of the op agree bit for bit. The converters are in ``spikec.frontend.snntorch``.

Per step, from the reset state (every state zero, as ``reset_mem`` / ``utils.reset`` leave it), with ``θ`` the
threshold and ``x`` the step's input::

    fire(v) = [v - θ > 0]      float32 0/1: every snntorch.surrogate forward is (input > 0).float(), strict ">"
    r       = fire(mem)        the delayed reset, read from the mem the previous step returned (first step: 0)
    spk     = fire(mem) * g    g = graded_spikes_factor, 0-dim; float32 spikes times g stay float32

    Leaky (lif_snntorch)       zero:     mem = (1 - r) * mem            (before the decay)
                               mem = beta * mem + x
                               subtract: mem = mem - r * θ
    Synaptic, RSynaptic        syn = alpha * syn + x  [+ rec(spk_prev)]   (RSynaptic; syn is never reset)
                               rec_add "input": syn = alpha * syn + (x + rec(spk_prev)), the order of a NIR
                               CubaLIF fed back through an Affine/Linear (NIR sums a node's edges first)
      (synaptic_snntorch)      b   = beta * mem + syn
                               subtract: mem = b - r * θ;   zero: mem = b - b * r;   none: mem = b
    RLeaky (rleaky_snntorch)   b   = beta * mem + x + rec(spk_prev)       (left to right)
                               subtract: mem = b - r * θ;   zero: mem = b - r * b;   none: mem = b
    then (all four)            s = fire(mem)              the spike; margin |mem - θ|
      reset_delay=False        d = spk / g - r            (= s - r exactly: float32(g) / float32(g) is 1; the
                                                           converter refuses it on RSynaptic, see there)
                               subtract: mem = mem - d * θ;   zero: mem = mem - d * mem;   none: unchanged

    Alpha (alpha_snntorch)     se' = alpha * se + x;   si' = beta * si - x;   m' = tau * (se' + si')
                               subtract: se = se' - θ * r;  si = si' - si' * r;  mem = m' - (-si) * r  (si: previous)
                               zero:     v = v' - v' * r for each of se, si, mem;   none: v = v'
                               s = fire(mem); no immediate reset (Alpha has no reset_delay)
                               tau = log(alpha) / (log(beta) - log(alpha)) + 1, computed by the converter in
                               float64 exactly as snnTorch computes it each step

    rec(spk)   one_to_one: spk * V;   linear: F.linear(spk, weight, bias);   conv2d: F.conv2d(spk, weight, bias,
               padding); spk is the previous step's spikes (float64 zeros at the first step, then float32 0/1:
               the converters refuse a graded_spikes_factor other than 1 on these)

``alpha`` and ``beta`` are held clamped to [0, 1] as snnTorch clamps them in each step. What each op returns
as ``mem`` (read ``"mem"``) is the ``mem`` snnTorch returns: after the delayed reset, and after the immediate
reset when ``reset_delay=False``. Rounding: snnTorch's spikes, ``r`` and ``d`` are float32 tensors, so a product
with a 0-dim float64 parameter (``r * θ``, ``d * θ``, ``spk * V``) is computed in float32 (the parameter rounded
to float32), while with a per-channel (1-dim) parameter it is float64; the params keep their 0-dim-ness for this.
A float64 snnTorch run cannot feed its float32 spikes to a float64 ``nn.Linear``/``nn.Conv2d`` recurrence (torch
raises); these kernels give those layers the spikes in float64, which is exact (the values are 0 and 1).

Ops and parameter layouts (C = ``shape[0]`` of a step)::

  lif_snntorch       beta, threshold: () or (C,)
                     attrs reset "subtract" | "zero" | "none", reset_delay (bool), read "spikes" | "mem"
  synaptic_snntorch  alpha, beta, threshold: () or (C,); the recurrence's params (below)
                     attrs reset, reset_delay, recurrent "none" | "one_to_one" | "linear" | "conv2d",
                     padding [ph, pw] (conv2d), read "spikes" | "syn" | "mem", rec_add "after" (default,
                     snnTorch's order) | "input" (a NIR file's: the recurrence summed with the input first)
  rleaky_snntorch    beta, threshold: () or (C,); the recurrence's params
                     attrs reset, reset_delay, recurrent "one_to_one" | "linear" | "conv2d", padding, read
                     "spikes" | "mem"
  alpha_snntorch     alpha, beta, threshold, tau: () or (C,)
                     attrs reset, read "spikes" | "syn_exc" | "syn_inh" | "mem"
  recurrence         one_to_one: V () or (C,)  (snnTorch's RecurrentOneToOne, ``spk * V``)
                     linear:     weight (N, N) as nn.Linear's [out, in], bias (N,) optional; a step is (N,)
                     conv2d:     weight (C, C, kh, kw) as nn.Conv2d's, bias (C,) optional; a step is (C, H, W);
                                 stride 1, dilation 1, groups 1, zero padding that keeps H and W

``read`` picks which sequence of the run a node outputs: the binary spikes (the graded value is a ``scale``
node after it), or a state snnTorch returns (real). Only ``read="spikes"`` records firing margins. (It is not
the built-in neurons' ``output`` attribute, whose "membrane" is lif's pre-reset ``U``; Norse's ops use ``read``
the same way.)
"""
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only
from spikec.ops import decay_params, define, register_kernel
from spikec.ops.common import channel, per_channel, sizes
from spikec.ops.registry import need

# the ops' names, for the converter (snntorch.py): the cards below are the one place they are written
LIF_SNNTORCH, SYNAPTIC_SNNTORCH, RLEAKY_SNNTORCH, ALPHA_SNNTORCH = (
    "lif_snntorch", "synaptic_snntorch", "rleaky_snntorch", "alpha_snntorch")
RESETS = ("subtract", "zero", "none")
REC_ADD = ("after", "input")  # where rec(spk) joins the synaptic current: after alpha*syn + x, or with x first
RECURRENT = ("one_to_one", "linear", "conv2d")
READS = {"lif_snntorch": ("spikes", "mem"), "synaptic_snntorch": ("spikes", "syn", "mem"),
         "rleaky_snntorch": ("spikes", "mem"), "alpha_snntorch": ("spikes", "syn_exc", "syn_inh", "mem")}
SCALARS = {"lif_snntorch": ("beta", "threshold"), "synaptic_snntorch": ("alpha", "beta", "threshold"),
           "rleaky_snntorch": ("beta", "threshold"), "alpha_snntorch": ("alpha", "beta", "threshold", "tau")}


# -- type inference --------------------------------------------------------------------------
def _infer(node, ins):
    (t,) = ins
    op = node.op
    per_channel(node, t, SCALARS[op] + ("V",))
    need(node.attrs.get("reset") in RESETS, node, f"reset must be one of {RESETS}, got {node.attrs.get('reset')!r}")
    if op != "alpha_snntorch":
        need(node.attrs.get("reset_delay") in (True, False), node, "reset_delay must be True or False")
    read = node.attrs.get("read", "spikes")
    need(read in READS[op], node, f"read must be one of {READS[op]}, got {read!r}")
    if op in ("synaptic_snntorch", "rleaky_snntorch"):
        _infer_recurrence(node, t)
    if op == "synaptic_snntorch":
        need(node.attrs.get("rec_add", "after") in REC_ADD, node,
             f"rec_add must be one of {REC_ADD}, got {node.attrs.get('rec_add')!r}")
    return TensorType(t.shape, "binary") if read == "spikes" else TensorType(t.shape)


def _infer_recurrence(node, t):
    kind, p = node.attrs.get("recurrent"), node.params
    kinds = RECURRENT if node.op == "rleaky_snntorch" else ("none",) + RECURRENT
    need(kind in kinds, node, f"recurrent must be one of {kinds}, got {kind!r}")
    allowed = {"none": (), "one_to_one": ("V",), "linear": ("weight", "bias"), "conv2d": ("weight", "bias")}[kind]
    extra = [k for k in ("V", "weight", "bias") if k in p and k not in allowed]
    need(not extra, node, f"recurrent {kind!r} takes no parameter {', '.join(extra)}")
    if kind == "one_to_one":
        need("V" in p, node, "a one_to_one recurrence needs parameter V")
    elif kind == "linear":
        n = t.shape[0]
        need(len(t.shape) == 1, node, f"a linear recurrence needs a step of shape (N,), got {t.shape}")
        need("weight" in p and p["weight"].shape == (n, n), node, f"weight must have shape ({n}, {n})")
    elif kind == "conv2d":
        need(len(t.shape) == 3, node, f"a conv2d recurrence needs a step of shape (C, H, W), got {t.shape}")
        c, h, w = t.shape
        need("weight" in p and p["weight"].ndim == 4 and p["weight"].shape[:2] == (c, c), node,
             f"weight must have shape ({c}, {c}, kh, kw)")
        pad = node.attrs.get("padding")
        need(isinstance(pad, (tuple, list)) and len(pad) == 2 and all(isinstance(v, int) and v >= 0 for v in pad),
             node, f"padding must be two non-negative ints, got {pad!r}")
        kh, kw = p["weight"].shape[2:]
        need((h + 2 * pad[0] - kh + 1, w + 2 * pad[1] - kw + 1) == (h, w), node,
             f"the recurrent conv2d maps ({h}, {w}) to ({h + 2 * pad[0] - kh + 1}, {w + 2 * pad[1] - kw + 1}); "
             "its output must have the step's shape")
    if "bias" in p:
        need(p["bias"].shape == (t.shape[0],), node, f"bias must have shape ({t.shape[0]},)")


def _count(node) -> int:
    """Deployed parameters, counted on the spike node only (a state read-out shares them)."""
    if node.attrs.get("read", "spikes") != "spikes":
        return 0
    return sizes(node, *SCALARS[node.op], "V", "weight", "bias")


# -- kernels ---------------------------------------------------------------------------------
def _fire(mem, theta):
    """snnTorch's ``spike_grad(mem - threshold)``: float32 0/1, strict ``>``."""
    return (mem - theta > 0).float()


def _immediate_reset(kind, mem, s, reset, theta):
    """``reset_delay=False``: ``d = spk / g - reset`` (float32, equal to ``s - reset``), then the reset again."""
    d = s - reset
    if kind == "subtract":
        return mem - d * theta
    if kind == "zero":
        return mem - d * mem
    return mem


class _Run:
    """Outputs of a kernel run: the read sequence, and the firing margins when the read is the spikes."""

    def __init__(self, node, x):
        self.read = node.attrs.get("read", "spikes")
        self.out = torch.empty_like(x)
        self.margins = torch.empty_like(x) if self.read == "spikes" else None

    def put(self, t, s, fired, theta, **states):
        if self.margins is not None:
            self.margins[t] = (fired - theta).abs()
        self.out[t] = s if self.read == "spikes" else states[self.read]

    def result(self):
        return (self.out, self.margins) if self.margins is not None else self.out


def lif_snntorch_kernel(node, p, x):
    """snnTorch ``Leaky.forward`` step by step, in its order of operations."""
    float_only(node, x)
    beta, theta = (channel(p[k], x.dim() - 1) for k in ("beta", "threshold"))
    kind, delay = node.attrs["reset"], node.attrs["reset_delay"]
    run, mem = _Run(node, x), torch.zeros_like(x[0])
    for t, x_t in enumerate(x):
        reset = _fire(mem, theta)
        if kind == "zero":
            mem = (1 - reset) * mem
        mem = beta * mem + x_t
        if kind == "subtract":
            mem = mem - reset * theta
        s = _fire(mem, theta)
        fired = mem
        if not delay:
            mem = _immediate_reset(kind, mem, s, reset, theta)
        run.put(t, s, fired, theta, mem=mem)
    return run.result()


def _recurrence(node, p, nd):
    """``rec(spk)`` of snnTorch's ``recurrent`` module, or None."""
    kind = node.attrs["recurrent"]
    if kind == "none":
        return None
    if kind == "one_to_one":
        v = channel(p["V"], nd)
        return lambda spk: spk * v
    w, b = p["weight"], p.get("bias")
    if kind == "linear":
        return lambda spk: F.linear(spk.to(w.dtype), w, b)
    return lambda spk: F.conv2d(spk.to(w.dtype), w, b, padding=tuple(node.attrs["padding"]))


def recurrent_kernel(node, p, x):
    """snnTorch ``Synaptic``, ``RSynaptic`` (op ``synaptic_snntorch``) and ``RLeaky`` (``rleaky_snntorch``)."""
    float_only(node, x)
    nd = x.dim() - 1
    synaptic = node.op == "synaptic_snntorch"
    alpha = channel(p["alpha"], nd) if synaptic else None
    beta, theta = (channel(p[k], nd) for k in ("beta", "threshold"))
    rec = _recurrence(node, p, nd)
    kind, delay = node.attrs["reset"], node.attrs["reset_delay"]
    run = _Run(node, x)
    syn, mem, spk = torch.zeros_like(x[0]), torch.zeros_like(x[0]), torch.zeros_like(x[0])
    for t, x_t in enumerate(x):
        reset = _fire(mem, theta)
        if synaptic:
            if rec is not None and node.attrs.get("rec_add", "after") == "input":
                syn = alpha * syn + (x_t + rec(spk))
            else:
                syn = alpha * syn + x_t
                if rec is not None:
                    syn = syn + rec(spk)
            base = beta * mem + syn
        else:
            base = beta * mem + x_t + rec(spk)
        if kind == "subtract":
            mem = base - reset * theta
        elif kind == "zero":
            mem = base - base * reset  # snnTorch subtracts a recomputed, identical base times the reset
        else:
            mem = base
        s = spk = _fire(mem, theta)
        fired = mem
        if not delay:
            mem = _immediate_reset(kind, mem, s, reset, theta)
        run.put(t, s, fired, theta, syn=syn, mem=mem)
    return run.result()


def alpha_snntorch_kernel(node, p, x):
    """snnTorch ``Alpha.forward`` step by step, in its order of operations."""
    float_only(node, x)
    alpha, beta, theta, tau = (channel(p[k], x.dim() - 1) for k in ("alpha", "beta", "threshold", "tau"))
    kind = node.attrs["reset"]
    run = _Run(node, x)
    se, si, mem = torch.zeros_like(x[0]), torch.zeros_like(x[0]), torch.zeros_like(x[0])
    for t, x_t in enumerate(x):
        reset = _fire(mem, theta)
        se_b = alpha * se + x_t
        si_b = beta * si - x_t
        mem_b = tau * (se_b + si_b)
        if kind == "subtract":
            se, si, mem = se_b - theta * reset, si_b - si_b * reset, mem_b - (-si) * reset
        elif kind == "zero":
            se, si, mem = se_b - se_b * reset, si_b - si_b * reset, mem_b - mem_b * reset
        else:
            se, si, mem = se_b, si_b, mem_b
        run.put(t, _fire(mem, theta), mem, theta, syn_exc=se, syn_inh=si, mem=mem)
    return run.result()


_RECURRENT_PARAMS = ("V", "weight", "bias")
# snnTorch's beta = 0 is its stateless Leaky: a zero decay is no warning
define(LIF_SNNTORCH, 1, _infer, ("beta", "threshold"), count=_count, stateful=True, neuron=True,
       decay=decay_params("beta", zero_ok=True), state=("mem",), threshold_margin=True)
define(SYNAPTIC_SNNTORCH, 1, _infer, ("alpha", "beta", "threshold"), _RECURRENT_PARAMS, count=_count,
       stateful=True, neuron=True, decay=decay_params("alpha", "beta", zero_ok=True), state=("syn", "mem", "spk"),
       threshold_margin=True)
define(RLEAKY_SNNTORCH, 1, _infer, ("beta", "threshold"), _RECURRENT_PARAMS, count=_count, stateful=True,
       neuron=True, decay=decay_params("beta", zero_ok=True), state=("mem", "spk"), threshold_margin=True)
define(ALPHA_SNNTORCH, 1, _infer, ("alpha", "beta", "threshold", "tau"), count=_count, stateful=True, neuron=True,
       decay=decay_params("alpha", "beta", zero_ok=True), state=("syn_exc", "syn_inh", "mem"))
register_kernel("lif_snntorch", lif_snntorch_kernel)
register_kernel("synaptic_snntorch", recurrent_kernel)
register_kernel("rleaky_snntorch", recurrent_kernel)
register_kernel("alpha_snntorch", alpha_snntorch_kernel)
