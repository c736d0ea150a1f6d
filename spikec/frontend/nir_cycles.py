"""Reading back the CubaLIF reset cycles spikec writes (``composed.membrane_cuba``, ``composed.snntorch_leaky``,
``composed.lif_subtract``, ``composed.sj_soft``, ``recurrent.rleaky``) as the op they came from.

The pattern, matched node by node: a ``CubaLIF`` whose membrane is its current (no membrane memory:
``1 - dt/tau_mem == 0``, Norse's ``1 - dt*(1/tau_mem)`` within ``ROUNDING`` of 0; ``v_leak = v_reset = 0``), and
one or two loops ``CubaLIF -> f -> p -> CubaLIF`` where ``p`` is an identity (an ``Affine`` with weight ``I`` and no
bias, or a 1x1 stride-1 unpadded ``Conv2d`` with a per-channel weight of 1 and no bias) that only ``f`` feeds and
only the CubaLIF reads, and ``f`` is fed by the CubaLIF alone: a per-neuron weight ``w`` (zero-bias diagonal
``Affine`` or per-channel 1x1 ``Conv2d``), or, for the recurrence of an RLeaky, a dense ``Linear``. Anything else in
such a loop is refused naming the node and what differs.

With the current ``i`` in input units (``m = i / A``, ``A`` its input gain: 1 in the snntorch scheme, ``w_in
dt/tau_syn`` in the norse scheme) the cycle steps ``m_t = B m_{t-1} + x_t + w s_{t-1}`` and fires ``m_t > T``
(``B`` the current's decay, ``T`` the membrane's threshold over its gains, computed as the interpreter does). So:

* one loop whose ``-w`` is ``T`` (``-float32(T)`` with one threshold: snnTorch subtracts a 0-dim threshold in
  float32): snnTorch's default ``Leaky``, ``lif_snntorch`` (subtract, ``reset_delay=True``, beta ``B``, threshold
  ``T``; its ``mem - T > 0`` is ``m > T``);
* one loop whose ``-w / B`` is ``nextafter(T, +inf)``: spikec's subtract-reset ``lif`` (``U = m``, alpha 1,
  threshold ``nextafter(T, +inf)``: ``U >= θ`` is ``m > T``); SpikingJelly's soft reset (``composed.sj_soft``: the
  input scaled by ``k`` in an Affine before the CubaLIF, ``B = 1 - k``) reads so too, its ``H`` being that ``U``;
* two loops, one the Leaky's reset, the other the recurrence: ``rleaky_snntorch`` (``linear`` from a ``Linear``,
  ``one_to_one`` from a per-neuron weight; ``V`` 0-dim when it is one float32 value, as snnTorch multiplies it).

Rounding: NIR sums a node's edges first (``B m + (x + w s)``) where the ops compute ``(B m + x) - θ s``, and in the
norse scheme the membrane is ``v + a_m (r i - v)``; equal in exact arithmetic, so each reading is the op in real
arithmetic and the frontend's check compares every spike with spikec's NIR interpreter on the inputs. A reset weight
that matches ``T`` only within ``RTOL`` (the norse scheme's gains) is read with ``T`` as the threshold.
"""
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.frontend.snntorch_neurons import LIF_SNNTORCH, RLEAKY_SNNTORCH
from spikec.ops.neurons import LIF
from spikec.formats.nir.interpreter import kind

ROUNDING = 1e-12   # Norse's dt*(1/tau_mem) with tau_mem = dt may be 1 +- 1 ulp: no membrane memory
RTOL = 1e-9        # a reset weight within this of the threshold (the norse scheme's gains): the same reset
REMEDY = ("write the neuron with spikec (its NIR target writes this cycle exactly), or compile the model it came "
          "from; spikec reads the CubaLIF reset cycles its NIR target writes")


def _refuse(name, node, why):
    raise UnsupportedOp(why, where=f"NIR node {name!r} ({kind(node)})", remedy=REMEDY)


def _identity(node) -> bool:
    """The pass-through node of a cycle: Affine(I, 0) or a 1x1, stride-1, unpadded Conv2d of per-channel 1, no bias."""
    k = kind(node)
    if k == "Affine":
        w = np.asarray(node.weight, dtype=np.float64)
        return w.ndim == 2 and w.shape[0] == w.shape[1] and np.array_equal(w, np.eye(w.shape[0])) and \
            not np.any(np.asarray(node.bias))
    return k == "Conv2d" and _conv_diagonal(node) is not None and bool((_conv_diagonal(node) == 1).all())


def _conv_diagonal(node) -> np.ndarray | None:
    """The per-channel weight of a 1x1, stride-1, unpadded, bias-free Conv2d that mixes no channels (dense or
    depthwise), else None."""
    w = np.asarray(node.weight, dtype=np.float64)
    flat = lambda v: [int(i) for i in np.atleast_1d(np.asarray(v)).ravel()] if not isinstance(v, (str, bytes)) \
        else None
    if w.ndim != 4 or w.shape[2:] != (1, 1) or np.any(np.asarray(node.bias)) or \
            flat(node.stride) is None or any(s != 1 for s in flat(node.stride)) or \
            flat(node.padding) is None or any(p != 0 for p in flat(node.padding)):
        return None
    c, groups = w.shape[0], int(np.asarray(node.groups))
    if groups == c and w.shape[1] == 1:
        return w[:, 0, 0, 0].copy()
    m = w[:, :, 0, 0]
    if groups != 1 or m.shape[0] != m.shape[1] or np.count_nonzero(m - np.diag(np.diag(m))):
        return None
    return np.diag(m).copy()


def per_neuron_weight(node) -> np.ndarray | None:
    """The per-neuron weight of a feedback that only scales each neuron (zero-bias diagonal Affine, per-channel 1x1
    Conv2d), else None."""
    k = kind(node)
    if k == "Conv2d":
        return _conv_diagonal(node)
    if k != "Affine" or np.any(np.asarray(node.bias)):
        return None
    w = np.asarray(node.weight, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or np.count_nonzero(w - np.diag(np.diag(w))):
        return None
    return np.diag(w).copy()


def loop(conv, u: str, v: str) -> tuple[str, str] | str | None:
    """``(feedback, identity)`` when the back edge ``u -> v`` into the CubaLIF ``v`` closes ``v -> f -> u -> v`` with
    ``u`` an identity only ``f`` feeds and only ``v`` reads, and ``f`` fed by ``v`` alone and read by ``u`` alone; why
    not (a string) when the loop has three nodes but is not that; None for any other shape (the caller reads it as
    another pattern, or refuses it)."""
    nodes = conv.nodes
    feeds = [s for s, d in conv.edges if d == u]
    if isinstance(nodes[u], tuple) or len(feeds) != 1 or feeds[0] == v or isinstance(nodes[feeds[0]], tuple) or \
            [s for s, d in conv.edges if d == feeds[0]] != [v]:
        return None
    f = feeds[0]
    head = f"the cycle {v!r} -> {f!r} -> {u!r} -> {v!r} is not a reset cycle spikec writes: "
    if kind(nodes[u]) == "Conv1d" or kind(nodes[f]) == "Conv1d":
        return head + "a Conv1d in it (the IR has no 1-D convolution)"
    if not _identity(nodes[u]):
        return head + (f"{u!r} ({kind(nodes[u])}) is not an identity (an Affine with weight I and no bias, or a 1x1, "
                       "stride-1, unpadded Conv2d of per-channel weight 1 and no bias)")
    others = [d for d in conv.outs(u) + conv.outs(f) if d not in (u, v)]
    if others:
        return head + f"{others[0]!r} reads a node of the loop besides it"
    return f, u


def input_bias(conv, v: str) -> str | None:
    """The ``Affine(I, b)`` (nonzero ``b``) that alone feeds the CubaLIF ``v`` of an RLeaky with a dense recurrence
    and feeds nothing else: ``recurrent.rleaky`` moves the recurrence's bias there (nirtorch reads a cycle as 0 at
    the first step), and it is read back as the op's ``bias`` (``rec(s) = W s + b``: equal in exact arithmetic)."""
    loops, ins = conv.cycles[v], conv.ins(v)
    if len(loops) != 2 or not any(kind(conv.nodes[f]) == "Linear" for f, _ in loops) or len(ins) != 1:
        return None
    a, node = ins[0], conv.nodes[ins[0]]
    if isinstance(node, tuple) or kind(node) != "Affine" or conv.outs(a) != [v]:
        return None
    w, b = np.asarray(node.weight, dtype=np.float64), np.asarray(node.bias, dtype=np.float64)
    ok = w.ndim == 2 and w.shape[0] == w.shape[1] and np.array_equal(w, np.eye(w.shape[0])) and b.shape == w.shape[:1]
    return a if ok and np.any(b) else None


def _params(conv, n, node, shape) -> tuple[np.ndarray, np.ndarray]:
    """``(B, T)`` per channel: the current's decay and the firing threshold in input units
    (``m = i / A`` fires on ``m > T``), as the interpreter computes them; refuses a membrane with memory."""
    c, dt = shape[0], conv.dt
    full = lambda v, what: np.broadcast_to(conv.channel(n, node, v, shape, what), (c,)).astype(np.float64)
    tau_syn, tau_mem, r, v_leak, v_th, v_reset, w_in = (full(getattr(node, k), k) for k in (
        "tau_syn", "tau_mem", "r", "v_leak", "v_threshold", "v_reset", "w_in"))
    why = [f"{k} != 0" for k, v in (("v_leak", v_leak), ("v_reset", v_reset)) if np.any(v != 0)]
    if conv.scheme == "snntorch":
        decay_mem, gs, gm = 1 - dt / tau_mem, w_in * dt / tau_syn, r * dt / tau_mem
        if np.any(gm * gs == 0):
            _refuse(n, node, "r = 0 or w_in = 0: the membrane's gain is 0, it has no threshold")
        B, T = 1 - dt / tau_syn, v_th / (gm * gs)
        memory = np.any(decay_mem != 0)
    else:
        a_s, a_m = dt * (1 / tau_syn), dt * (1 / tau_mem)
        decay_mem, B, A = 1 - a_m, 1 - a_s, a_s * w_in
        memory = np.any(np.abs(decay_mem) > ROUNDING)
        if np.any(a_m * r <= 0) or np.any(A <= 0):
            why.append("a non-positive membrane gain dt/tau_mem*r or input gain dt/tau_syn*w_in")
        T = v_th / (a_m * r * A)
    if memory:
        why.append(f"a membrane decay of {float(np.max(np.abs(decay_mem))):g} at dt = {dt:g} (the cycle's membrane is "
                   "its current: tau_mem = dt)")
    if why:
        _refuse(n, node, f"a CubaLIF in a reset cycle is read only as the membrane-is-current form spikec writes: "
                    f"{'; '.join(why)}")
    return (np.clip(B, 0.0, 1.0) if np.all(np.abs(B - np.clip(B, 0, 1)) <= ROUNDING) else B), T


NEGATIVE = ("a negative threshold {}: snnTorch's Leaky/RLeaky resets at the first step already (its delayed reset "
            "reads 0 > threshold), the NIR cycle does not (it carries no spike at rest); spikec writes this cycle for "
            "threshold >= 0 only")


def _leaky_threshold(n, node, sub: np.ndarray, T: np.ndarray, close) -> np.ndarray | None:
    """The Leaky's threshold when the amount removed per spike ``sub`` is (``close`` to) the threshold ``T``: 0-dim
    when it is one float32 value (snnTorch subtracts a 0-dim threshold in float32), else per channel. A negative
    ``T`` that matches is refused (``NEGATIVE``)."""
    one = bool((T == T[0]).all() and (sub == sub[0]).all())
    with np.errstate(over="ignore"):
        f32 = np.float32(T).astype(np.float64)
    theta = np.asarray(T[0]) if one and close(sub, f32) else (T.copy() if close(sub, T) else None)
    if theta is not None and np.any(T < 0):
        _refuse(n, node, NEGATIVE.format(np.unique(T[T < 0])[:3]))
    return theta


def _scalar(v: np.ndarray) -> np.ndarray:
    return np.asarray(v[0]) if (v == v[0]).all() else v


def read(conv, n: str, node, x: str, loops: list[tuple[str, str]], bias=None) -> str:
    """Emit the op the CubaLIF ``n`` and its ``loops`` (``[(feedback, identity)]``) are (an RLeaky's recurrence
    ``bias`` from ``input_bias``); refuse any other."""
    shape = conv.ctx.type(x).shape
    c = shape[0]
    B, T = _params(conv, n, node, shape)
    weights = []
    for f, _ in loops:
        fb = conv.nodes[f]
        w = per_neuron_weight(fb)
        if w is not None and w.shape == (c,):
            weights.append((f, w))
        elif kind(fb) == "Linear" and len(shape) == 1 and np.asarray(fb.weight).shape == (c, c):
            weights.append((f, None))
        else:
            _refuse(f, fb, f"a feedback of the CubaLIF {n!r}'s reset cycle that is not a per-neuron weight (zero-"
                        f"bias diagonal Affine, per-channel 1x1 Conv2d) or, for an RLeaky's recurrence, a dense "
                        f"Linear on a step of shape (N,) (step shape {tuple(shape)})")
    attrs = {"reset": "subtract", "reset_delay": True, "read": "spikes"}
    if len(loops) == 1:
        f, w = weights[0]
        if w is None:
            _refuse(f, conv.nodes[f], f"a dense Linear is the only cycle of the CubaLIF {n!r}: an RLeaky's "
                    "recurrence without its reset")
        sub, fire = -w, np.nextafter(T, np.inf)   # the feedback joins the input: in input units as it is
        with np.errstate(divide="ignore", invalid="ignore"):
            amount = sub / B
        lif = lambda close: bool(np.all(B > 0)) and close(amount, fire)   # U_t = B (U - amount S) + x, U >= fire
        # exact matches first: a subtract-reset lif's -beta*theta (a beta = 1 one's theta is 1 ulp above T, which
        # float32(T) may round to: not the Leaky), then the Leaky's -T; then within RTOL (the norse scheme's gains)
        exact, near = np.array_equal, lambda a, b: np.allclose(a, b, rtol=RTOL, atol=0)
        for close, op in ((exact, LIF), (exact, LIF_SNNTORCH), (near, LIF_SNNTORCH), (near, LIF)):
            if op == LIF and lif(close):
                return conv.lif(n, x, _scalar(B), 1.0, 0.0, _scalar(fire), reset="subtract")
            theta = _leaky_threshold(n, node, sub, T, close) if op == LIF_SNNTORCH else None
            if theta is not None:
                return conv.emit(n, LIF_SNNTORCH, [x], attrs, {"beta": _scalar(B), "threshold": theta})
        _refuse(f, conv.nodes[f], f"the feedback removes {np.unique(sub)[:3]} per spike; neither the threshold "
                f"{np.unique(T)[:3]} (snnTorch's Leaky) nor beta times it (a subtract-reset lif): not a reset")
    if len(loops) != 2:
        _refuse(n, node, f"a CubaLIF in {len(loops)} reset cycles; spikec reads one (a Leaky, a subtract-reset lif)"
                    " or two (an RLeaky: its reset and its recurrence)")
    return _rleaky(conv, n, x, B, T, weights, attrs, bias)


def _rleaky(conv, n, x, B, T, weights, attrs, bias) -> str:
    """Two loops: the reset (a per-neuron ``-T``) and the recurrence (a dense Linear, or a per-neuron ``V``)."""
    exact, near = np.array_equal, lambda a, b: np.allclose(a, b, rtol=RTOL, atol=0)
    for close, k in ((exact, 0), (exact, 1), (near, 0), (near, 1)):
        (_, w), (g, v) = weights[k], weights[1 - k]
        theta = _leaky_threshold(n, conv.nodes[n], -w, T, close) if w is not None else None
        if theta is None:
            continue
        params = {"beta": _scalar(B), "threshold": theta}
        if v is None:
            params["weight"] = np.asarray(conv.nodes[g].weight, dtype=np.float64)
            rec = "linear"
            if bias is not None:
                params["bias"] = np.asarray(bias, dtype=np.float64)
        else:
            with np.errstate(over="ignore"):
                one = bool((v == v[0]).all() and np.float32(v[0]) == v[0])
            params["V"], rec = (np.asarray(v[0]) if one else v), "one_to_one"
        return conv.emit(n, RLEAKY_SNNTORCH, [x], {**attrs, "recurrent": rec}, params)
    names = ", ".join(repr(f) for f, _ in weights)
    _refuse(n, conv.nodes[n], f"neither feedback ({names}) of the CubaLIF's two cycles removes the threshold "
                f"{np.unique(T)[:3]} per spike: not an RLeaky's reset and recurrence")
