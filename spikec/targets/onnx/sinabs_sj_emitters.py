"""ONNX emitters of the framework-exact neurons added beside ``framework_emitters``: Sinabs's ``lif_sinabs``
(``spikec/frontend/sinabs.py``) and SpikingJelly's ``qif_sj``, ``eif_sj``, ``izhikevich_sj``
(``spikec/frontend/spikingjelly_nonlinear.py``).

Each unrolls its kernel over the fixed T, one ONNX node per torch operation in the kernel's order. Sinabs's
spikes are float32 tensors: a count (MultiSpike) is truncated in float64 and cast to float32, and a reset's
``spikes * threshold`` is a float32 product (the 0-dim parameter rounded to float32), as in the kernel; both are
emitted as float32 nodes between two Casts, so the values are bit-identical to the interpreter's in float64.
SpikingJelly's parameters are Python floats (float64). EIF's ``exp`` is onnxruntime's, not torch's: the two
libraries' float64 ``exp`` may differ in the last bit, so ``eif_sj`` is exact on ONNX only where they agree
(measured in ``tests/frontend/test_spikingjelly_nonlinear.py``).

This module registers into ``emitters.EMITTERS``; ``spikec.targets.onnx`` must import it (it imports ``emitters``,
never the reverse).
"""
import numpy as np
from onnx import TensorProto

from spikec.ir.graph import Node
from spikec.targets.onnx.builder import Builder
from spikec.targets.onnx.emitters import emitter


# -- Sinabs ----------------------------------------------------------------------------------------------
def _f32(b: Builder, x: str) -> str:
    return b.op("Cast", [x], to=TensorProto.FLOAT)


def _back(b: Builder, x: str) -> str:
    return b.op("Cast", [x], to=b.elem)


def _sinabs_fire(b: Builder, node: Node, v: str, theta: str) -> str:
    """Sinabs's float32 spikes: ``[v - θ >= 0]``, or ``[v > 0] * trunc(v / θ)`` (clamped at ``max_spikes``)."""
    zero = b.const(0.0, "zero")
    if node.attrs["spike"] == "single":
        return b.op("Cast", [b.op("GreaterOrEqual", [b.sub(v, theta), zero])], to=TensorProto.FLOAT)
    q = b.op("Div", [v, theta])
    trunc = b.op("Where", [b.op("GreaterOrEqual", [q, zero]), b.op("Floor", [q]), b.op("Ceil", [q])])
    s = b.op("Where", [b.op("Greater", [v, zero]), _f32(b, trunc), b.const(0.0, "zero_f32", np.float32)])
    if node.attrs["spike"] == "max":
        s = b.op("Min", [s, b.const(float(node.attrs["max_spikes"]), f"{node.name}.max_spikes", np.float32)])
    return s


@emitter("lif_sinabs")
def lif_sinabs(b: Builder, node: Node, x: str) -> str:
    """Sinabs ``IAF`` / ``LIF`` / ``ExpLeak`` as ``lif_sinabs_kernel`` runs it."""
    p, a = node.params, node.attrs
    alpha = b.const(float(p["alpha_mem"]), f"{node.name}.alpha_mem")
    alpha_syn = b.const(float(p["alpha_syn"]), f"{node.name}.alpha_syn") if "alpha_syn" in p else None
    theta = b.const(float(p["threshold"]), f"{node.name}.threshold") if "threshold" in p else None
    vmin = b.const(float(p["min_v_mem"]), f"{node.name}.min_v_mem") if "min_v_mem" in p else None
    sub = None
    if a["reset"] == "subtract":  # out * θ (or subtract_value): the float32 spikes times the rounded parameter
        sub = b.const(np.float32(p["subtract"] if "subtract" in p else p["threshold"]), f"{node.name}.sub_f32",
                      np.float32)
    one, zero = b.const(1.0, "one"), b.const(0.0, "zero")
    v = b.state(node, "v", zero)
    i = b.state(node, "i", zero) if alpha_syn is not None else None
    outs = []
    for t, xt in enumerate(b.split_steps(x, b.time_len(x), f"{node.name}/x")):
        with b.scope(f"{node.name}/t{t}"):
            i = b.mul(alpha_syn, b.add(i, xt)) if alpha_syn is not None else xt    # alpha_syn * (i + x) | x
            u = b.mul(b.sub(one, alpha), i) if a["norm_input"] else i              # (1 - alpha) * i | i
            v = b.add(b.mul(alpha, v), u)                                          # alpha * v + u
            if a["spike"] == "none":
                out = b.op("Identity", [v])
            else:
                s = _sinabs_fire(b, node, v, theta)
                out = _back(b, s)
                if a["reset"] == "subtract":                                       # v - s * θ (float32 product)
                    v = b.sub(v, _back(b, b.mul(s, sub)))
                else:                                                              # v * [s == 0] + r
                    kept = b.spike(b.op("Equal", [s, b.const(0.0, "zero_f32", np.float32)]))
                    v = b.add(b.mul(v, kept), b.const(float(p["reset_value"]), f"{node.name}.reset_value"))
            if vmin is not None:                                                   # relu(v - m) + m
                v = b.add(b.op("Relu", [b.sub(v, vmin)]), vmin)
        outs.append(out)
    b.update_state(node, "v", v)
    if i is not None:
        b.update_state(node, "i", i)
    return b.stack_steps(outs, out=node.name)


# -- SpikingJelly's nonlinear neurons --------------------------------------------------------------------
def _sj_charge(b: Builder, node: Node, c, v: str, w: str | None, xt: str) -> str:
    """``H`` of ``nonlinear_sj_kernel``, operation by operation in Python's left-to-right order."""
    if node.op == "eif_sj":                     # v + (x + v_rest - v + delta_T * exp((v - theta_rh) / delta_T)) / tau
        e = b.op("Exp", [b.op("Div", [b.sub(v, c("theta_rh")), c("delta_T")])])
        inner = b.add(b.sub(b.add(xt, c("v_rest")), v), b.mul(c("delta_T"), e))
    else:                                       # v + (x + a0 * (v - v_rest) * (v - v_c) [- w]) / tau
        inner = b.add(xt, b.mul(b.mul(c("a0"), b.sub(v, c("v_rest"))), b.sub(v, c("v_c"))))
        if w is not None:
            inner = b.sub(inner, w)
    return b.add(v, b.op("Div", [inner, c("tau")]))


@emitter("qif_sj")
@emitter("eif_sj")
@emitter("izhikevich_sj")
def nonlinear_sj(b: Builder, node: Node, x: str) -> str:
    """SpikingJelly ``QIFNode`` / ``EIFNode`` / ``IzhikevichNode`` as ``nonlinear_sj_kernel`` runs it."""
    q = {k: float(v) for k, v in node.params.items()}

    def c(k):
        return b.const(q[k], f"{node.name}.{k}")
    theta, reset, one = c("threshold"), q.get("v_reset"), b.const(1.0, "one")
    start = 0.0 if reset is None else reset
    v = b.state(node, "v", b.const(start, f"{node.name}.v0"), start)
    w = b.state(node, "w", c("w_rest"), q["w_rest"]) if node.op == "izhikevich_sj" else None
    spikes = []
    for t, xt in enumerate(b.split_steps(x, b.time_len(x), f"{node.name}/x")):
        with b.scope(f"{node.name}/t{t}"):
            h = _sj_charge(b, node, c, v, w, xt)
            s = b.spike(b.op("GreaterOrEqual", [b.sub(h, theta), b.const(0.0, "zero")]))   # (h - theta >= 0)
            if w is not None:                   # w + (a * (h - v_rest) - w) / tau_w + b * s
                w = b.add(b.add(w, b.op("Div", [b.sub(b.mul(c("a"), b.sub(h, c("v_rest"))), w), c("tau_w")])),
                          b.mul(c("b"), s))
            if reset is None:
                v = b.sub(h, b.mul(s, theta))                                      # h - s * theta
            else:                                                                  # s * v_reset + (1 - s) * h
                v = b.add(b.mul(s, c("v_reset")), b.mul(b.sub(one, s), h))
        spikes.append(s)
    b.update_state(node, "v", v)
    if w is not None:
        b.update_state(node, "w", w)
    return b.stack_steps(spikes, out=node.name)
