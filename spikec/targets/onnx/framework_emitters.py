"""ONNX emitters of the frameworks' exact neurons: snnTorch's ``lif_snntorch``, ``synaptic_snntorch``,
``rleaky_snntorch``, ``alpha_snntorch`` (``spikec/frontend/snntorch_neurons.py``), SpikingJelly's ``lif_sj``
(``spikec/frontend/spikingjelly.py``) and Norse's ``lif_norse``, ``li_norse`` (``spikec/frontend/norse.py``),
``lif_recurrent_norse`` (``spikec/frontend/norse_recurrent.py``; its two MatMuls sum in their own order, as
``linear``'s), ``lif_adex_norse`` and ``lsnn_norse`` (``spikec/frontend/norse_adaptive.py``; AdEx's ``Exp`` is
onnxruntime's, which may differ from torch's by an ulp: a spike decided within that of the threshold would differ,
which the checker reports).

Each unrolls its kernel over the fixed T, one ONNX node per torch operation in the kernel's order, so every
value is bit-identical in float64 (the recurrent ``linear`` / ``conv2d`` layers excepted: a MatMul sums in its
own order, exact when the sums are, e.g. dyadic weights on 0/1 spikes; a few ulp otherwise, as ``linear``).

Every ``read`` of a run is emitted: the nodes of one neuron that differ only in ``read`` share one unrolled
recurrence (the interpreter runs the same kernel for each), and each stacks its own sequence.

Rounding that is not float64 in the kernels, repeated here: snnTorch's spikes and resets are float32 tensors, so
a product with a 0-dim float64 parameter (``reset * threshold``, ``spk * V``) is computed in float32: the
parameter rounded to float32 (a product with 0 or 1 is then exact in float64, which is how it is emitted). A
per-channel parameter is a 1-dim tensor and stays float64. SpikingJelly's parameters are Python floats
(float64); Norse's are float64 tensors.

This module registers into ``emitters.EMITTERS``; ``spikec.targets.onnx`` imports it (no cycle: it imports
``emitters``, never the reverse).
"""
import numpy as np
from onnx import numpy_helper

from spikec.ir.graph import Node
from spikec.targets.onnx.builder import Builder
from spikec.targets.onnx.emitters import emitter, im2col_conv


# -- shared ------------------------------------------------------------------------------------------
def _read_key(node: Node) -> tuple:
    """Nodes with equal keys run one recurrence and differ only in the sequence they read."""
    attrs = repr(sorted((k, v) for k, v in node.attrs.items() if k != "read"))
    params = tuple(sorted((k, v.dtype.str, v.shape, v.tobytes()) for k, v in node.params.items()))
    return "framework-neuron", node.op, node.inputs, attrs, params


def _sequences(b: Builder, node: Node, x: str, dynamics, default_read: str) -> str:
    """Unroll ``dynamics(b, node, steps) -> {read: [per-step names]}`` once per run; stack this node's read."""
    key = _read_key(node)
    if key not in b.cache:
        b.cache[key] = dynamics(b, node, b.split_steps(x, b.time_len(x), f"{node.name}/x"))
    return b.stack_steps(b.cache[key][node.attrs.get("read", default_read)], out=node.name)


def _param(b: Builder, node: Node, key: str) -> str:
    """A parameter as a constant broadcast against ``[1, B, *shape]`` (scalar, or ``(C, 1, ..)``)."""
    return b.per_channel(node.params[key], node.type.shape, f"{node.name}.{key}")


def _times_float32_spikes(b: Builder, node: Node, key: str) -> str:
    """A parameter as snnTorch multiplies float32 spikes by it: float32 when 0-dim, float64 per channel."""
    p = np.asarray(node.params[key])
    value = np.float64(np.float32(p)) if p.ndim == 0 else p
    return b.per_channel(value, node.type.shape, f"{node.name}.{key}_f32" if p.ndim == 0 else f"{node.name}.{key}")


def _greater(b: Builder, v: str, theta: str) -> str:
    """``[v - theta > 0]`` as 0/1: snnTorch's and Norse's spike (strict)."""
    return b.spike(b.op("Greater", [b.sub(v, theta), b.const(0.0, "zero")]))


def _zeros_like(b: Builder, x: str, hint: str) -> str:
    return b.op("ConstantOfShape", [b.op("Shape", [x], hint=f"{hint}/shape")], hint=hint,
                value=numpy_helper.from_array(np.zeros(1, dtype=b.np_dtype)))


# -- snnTorch ------------------------------------------------------------------------------------------
def _reset_after(b: Builder, kind: str, base: str, reset: str, theta_r: str) -> str:
    """The delayed reset of Synaptic/RLeaky: ``base - r θ`` (subtract), ``base - base r`` (zero), ``base``."""
    if kind == "subtract":
        return b.sub(base, b.mul(reset, theta_r))                                  # base - reset * theta
    if kind == "zero":
        return b.sub(base, b.mul(base, reset))                                     # base - base * reset
    return base


def _immediate_reset(b: Builder, kind: str, mem: str, spk: str, reset: str, theta_r: str) -> str:
    """``reset_delay=False``: ``d = spk - reset``, then ``mem - d θ`` / ``mem - d mem`` / ``mem``."""
    d = b.sub(spk, reset)
    if kind == "subtract":
        return b.sub(mem, b.mul(d, theta_r))                                       # mem - d * theta
    if kind == "zero":
        return b.sub(mem, b.mul(d, mem))                                           # mem - d * mem
    return mem


@emitter("lif_snntorch")
def lif_snntorch(b: Builder, node: Node, x: str) -> str:
    """snnTorch ``Leaky`` as ``lif_snntorch_kernel`` runs it; ``read`` spikes or the mem it returns."""
    def dynamics(b, node, steps):
        beta, theta = _param(b, node, "beta"), _param(b, node, "threshold")
        theta_r = _times_float32_spikes(b, node, "threshold")
        kind, delay = node.attrs["reset"], node.attrs["reset_delay"]
        one, out = b.const(1.0, "one"), {"spikes": [], "mem": []}
        mem = b.state(node, "mem", b.const(0.0, "zero"))                           # the reset is read from mem
        for t, xt in enumerate(steps):
            with b.scope(f"{node.name}/t{t}"):
                reset = _greater(b, mem, theta)                                    # (mem - theta > 0)
                if kind == "zero":
                    mem = b.mul(b.sub(one, reset), mem)                            # (1 - reset) * mem
                mem = b.add(b.mul(beta, mem), xt)                                  # beta * mem + x
                if kind == "subtract":
                    mem = b.sub(mem, b.mul(reset, theta_r))                        # mem - reset * theta
                spk = _greater(b, mem, theta)
                if not delay:
                    mem = _immediate_reset(b, kind, mem, spk, reset, theta_r)
            out["spikes"].append(spk)
            out["mem"].append(mem)
        b.update_state(node, "mem", mem)
        return out
    return _sequences(b, node, x, dynamics, "spikes")


def _recurrence(b: Builder, node: Node):
    """``rec(spk)`` of the op's ``recurrent`` layer on one step ``[1, B, *shape]``, or None."""
    kind, p, shape = node.attrs["recurrent"], node.params, node.type.shape
    if kind == "none":
        return None
    if kind == "one_to_one":
        v = _times_float32_spikes(b, node, "V")
        return lambda spk, hint: b.mul(spk, v)                                     # spk * V
    w, bias = np.asarray(p["weight"]), p.get("bias")
    if kind == "linear":
        w_t = b.const(np.ascontiguousarray(w.T), f"{node.name}.rec_weight_t")
        bias_c = b.const(bias, f"{node.name}.rec_bias") if bias is not None else None

        def linear(spk, hint):                                                     # F.linear(spk, W, b)
            y = b.op("MatMul", [spk, w_t], hint=f"{hint}/matmul")
            return y if bias_c is None else b.add(y, bias_c)
        return linear
    c, h, wd = shape
    return lambda spk, hint: im2col_conv(b, spk, 1, w, bias, (1, 1), tuple(node.attrs["padding"]), (1, 1), 1,
                                         (h, wd), hint)                           # F.conv2d(spk, W, b, padding)


def _recurrent_dynamics(b: Builder, node: Node, steps: list[str]) -> dict:
    """``recurrent_kernel``: Synaptic / RSynaptic (``synaptic_snntorch``) and RLeaky (``rleaky_snntorch``)."""
    synaptic = node.op == "synaptic_snntorch"
    alpha = _param(b, node, "alpha") if synaptic else None
    beta, theta = _param(b, node, "beta"), _param(b, node, "threshold")
    theta_r = _times_float32_spikes(b, node, "threshold")
    rec = _recurrence(b, node)
    kind, delay = node.attrs["reset"], node.attrs["reset_delay"]
    zero = b.const(0.0, "zero")
    syn = b.state(node, "syn", zero) if synaptic else zero
    mem = b.state(node, "mem", zero)
    spk = b.state(node, "spk", lambda: _zeros_like(b, steps[0], f"{node.name}/spk0")) if rec is not None else None
    out = {"spikes": [], "syn": [], "mem": []}
    for t, xt in enumerate(steps):
        with b.scope(f"{node.name}/t{t}"):
            reset = _greater(b, mem, theta)                                        # (mem - theta > 0)
            if synaptic:
                if rec is not None and node.attrs.get("rec_add", "after") == "input":   # a NIR file's order
                    syn = b.add(b.mul(alpha, syn), b.add(xt, rec(spk, f"{node.name}/t{t}/rec")))
                else:
                    syn = b.add(b.mul(alpha, syn), xt)                             # alpha * syn + x
                    if rec is not None:
                        syn = b.add(syn, rec(spk, f"{node.name}/t{t}/rec"))       # syn + rec(spk)
                base = b.add(b.mul(beta, mem), syn)                                # beta * mem + syn
            else:
                base = b.add(b.add(b.mul(beta, mem), xt), rec(spk, f"{node.name}/t{t}/rec"))   # beta mem + x + rec(spk)
            mem = _reset_after(b, kind, base, reset, theta_r)
            spk = _greater(b, mem, theta)
            if not delay:
                mem = _immediate_reset(b, kind, mem, spk, reset, theta_r)
        out["spikes"].append(spk)
        out["syn"].append(syn)
        out["mem"].append(mem)
    for k, v in (("syn", syn if synaptic else None), ("mem", mem), ("spk", spk if rec is not None else None)):
        if v is not None:
            b.update_state(node, k, v)
    return out


@emitter("synaptic_snntorch")
def synaptic_snntorch(b: Builder, node: Node, x: str) -> str:
    """snnTorch ``Synaptic`` / ``RSynaptic``; ``read`` spikes, syn or mem."""
    return _sequences(b, node, x, _recurrent_dynamics, "spikes")


@emitter("rleaky_snntorch")
def rleaky_snntorch(b: Builder, node: Node, x: str) -> str:
    """snnTorch ``RLeaky``; ``read`` spikes or mem."""
    return _sequences(b, node, x, _recurrent_dynamics, "spikes")


@emitter("alpha_snntorch")
def alpha_snntorch(b: Builder, node: Node, x: str) -> str:
    """snnTorch ``Alpha`` as ``alpha_snntorch_kernel`` runs it; ``read`` spikes, syn_exc, syn_inh or mem."""
    def dynamics(b, node, steps):
        alpha, beta, theta, tau = (_param(b, node, k) for k in ("alpha", "beta", "threshold", "tau"))
        theta_r = _times_float32_spikes(b, node, "threshold")
        kind = node.attrs["reset"]
        se, si, mem = (b.state(node, k, b.const(0.0, "zero")) for k in ("syn_exc", "syn_inh", "mem"))
        out = {"spikes": [], "syn_exc": [], "syn_inh": [], "mem": []}
        for t, xt in enumerate(steps):
            with b.scope(f"{node.name}/t{t}"):
                reset = _greater(b, mem, theta)                                    # (mem - theta > 0)
                se_b = b.add(b.mul(alpha, se), xt)                                 # alpha * se + x
                si_b = b.sub(b.mul(beta, si), xt)                                  # beta * si - x
                mem_b = b.mul(tau, b.add(se_b, si_b))                              # tau * (se' + si')
                if kind == "subtract":                                             # si: the previous step's
                    se, si, mem = (b.sub(se_b, b.mul(theta_r, reset)), b.sub(si_b, b.mul(si_b, reset)),
                                   b.sub(mem_b, b.mul(b.op("Neg", [si]), reset)))
                elif kind == "zero":
                    se, si, mem = (b.sub(v, b.mul(v, reset)) for v in (se_b, si_b, mem_b))
                else:
                    se, si, mem = se_b, si_b, mem_b
                spk = _greater(b, mem, theta)
            for read, value in zip(("spikes", "syn_exc", "syn_inh", "mem"), (spk, se, si, mem)):
                out[read].append(value)
        for k, v in (("syn_exc", se), ("syn_inh", si), ("mem", mem)):
            b.update_state(node, k, v)
        return out
    return _sequences(b, node, x, dynamics, "spikes")


# -- SpikingJelly ----------------------------------------------------------------------------------------
@emitter("lif_sj")
def lif_sj(b: Builder, node: Node, x: str) -> str:
    """SpikingJelly ``IFNode`` / ``LIFNode`` (``tau``) / ``ParametricLIFNode`` (``decay`` = sigmoid(w)) as
    ``lif_sj_kernel`` runs it, with Python-float (float64) parameters."""
    p = node.params
    theta = b.const(float(p["threshold"]), f"{node.name}.threshold")
    tau = b.const(float(p["tau"]), f"{node.name}.tau") if "tau" in p else None
    k = b.const(float(p["decay"]), f"{node.name}.decay") if "decay" in p else None
    v_reset = float(p["v_reset"]) if "v_reset" in p else None
    rest = b.const(0.0 if v_reset is None else v_reset, f"{node.name}.rest")
    one, decay_input = b.const(1.0, "one"), node.attrs["decay_input"]
    v, spikes = b.state(node, "v", rest, 0.0 if v_reset is None else v_reset), []
    for t, xt in enumerate(b.split_steps(x, b.time_len(x), f"{node.name}/x")):
        with b.scope(f"{node.name}/t{t}"):
            if tau is not None and decay_input:
                h = b.add(v, b.op("Div", [b.sub(xt, b.sub(v, rest)), tau]))      # v + (x - (v - rest)) / tau
            elif tau is not None:
                h = b.add(b.sub(v, b.op("Div", [b.sub(v, rest), tau])), xt)      # v - (v - rest) / tau + x
            elif k is not None and decay_input:
                h = b.add(v, b.mul(b.sub(xt, b.sub(v, rest)), k))                # v + (x - (v - rest)) * k
            elif k is not None:
                h = b.add(b.sub(v, b.mul(b.sub(v, rest), k)), xt)                # v - (v - rest) * k + x
            else:
                h = b.add(v, xt)                                                   # v + x
            s = b.spike(b.op("GreaterOrEqual", [b.sub(h, theta), b.const(0.0, "zero")]))   # (h - theta >= 0)
            if t + 1 < b.time_len(x) or b.streaming:
                if v_reset is None:
                    v = b.sub(h, b.mul(s, theta))                                  # h - s * theta
                else:                                                              # s * v_reset + (1 - s) * h
                    v = b.add(b.mul(s, b.const(v_reset, f"{node.name}.v_reset")), b.mul(b.sub(one, s), h))
        spikes.append(s)
    b.update_state(node, "v", v)
    return b.stack_steps(spikes, out=node.name)


# -- Norse ---------------------------------------------------------------------------------------------
def _norse_dynamics(b: Builder, node: Node, steps: list[str]) -> dict:
    """``norse_kernel``: one Euler step of Norse's LIF / LIFBox / LI / LIBox, from rest (v = v_leak, i = 0)."""
    spiking, current = node.op == "lif_norse", node.attrs["current"]
    a_mem, v_leak = _param(b, node, "dt_tau_mem_inv"), _param(b, node, "v_leak")
    neg_a_syn = b.per_channel(-np.asarray(node.params["dt_tau_syn_inv"]), node.type.shape,
                              f"{node.name}.neg_dt_tau_syn_inv") if current else None
    if spiking:
        v_th, v_reset, one = _param(b, node, "threshold"), _param(b, node, "v_reset"), b.const(1.0, "one")
    v = b.state(node, "v", v_leak, node.params["v_leak"])                         # from rest: v = v_leak, i = 0
    i = b.state(node, "i", b.const(0.0, "zero")) if current else None
    out = {"spikes": [], "v": [], "i": []}
    for t, xt in enumerate(steps):
        with b.scope(f"{node.name}/t{t}"):
            if current:
                i_jump = b.add(i, xt)                                              # i + x
                v_new = b.add(v, b.mul(a_mem, b.add(b.sub(v_leak, v), i_jump)))  # v + a_mem ((v_leak - v) + i')
                i = b.add(i_jump, b.mul(neg_a_syn, i_jump))                        # i' + (-a_syn) i'
            elif spiking:
                v_new = b.add(v, b.mul(a_mem, b.sub(b.add(xt, v_leak), v)))      # v + a_mem ((x + v_leak) - v)
            else:
                v_new = b.add(v, b.mul(a_mem, b.add(b.sub(v_leak, v), xt)))      # v + a_mem ((v_leak - v) + x)
            if spiking:
                z = _greater(b, v_new, v_th)                                       # (v~ - v_th > 0)
                after = v_reset if node.attrs["reset"] == "value" else b.sub(v_new, v_th)
                v_new = b.add(b.mul(b.sub(one, z), v_new), b.mul(z, after))      # (1 - z) v~ + z after
                out["spikes"].append(z)
            v = v_new
        out["v"].append(v)
        if current:
            out["i"].append(i)
    b.update_state(node, "v", v)
    if current:
        b.update_state(node, "i", i)
    return out


@emitter("lif_norse")
def lif_norse(b: Builder, node: Node, x: str) -> str:
    """Norse ``LIF`` / ``LIFCell`` (current) and ``LIFBoxCell``; ``read`` spikes, v or i."""
    return _sequences(b, node, x, _norse_dynamics, "spikes")


@emitter("li_norse")
def li_norse(b: Builder, node: Node, x: str) -> str:
    """Norse ``LI`` / ``LICell`` (current) and ``LIBoxCell``; ``read`` v or i."""
    return _sequences(b, node, x, _norse_dynamics, "v")


def _norse_recurrent_dynamics(b: Builder, node: Node, steps: list[str]) -> dict:
    """``lif_recurrent_norse_kernel``: Norse's ``lif_step``, from rest (z = 0, v = v_leak, i = 0)."""
    w_in = b.const(np.ascontiguousarray(np.asarray(node.params["input_weights"]).T), f"{node.name}.input_weights_t")
    w_rec = b.const(np.ascontiguousarray(np.asarray(node.params["recurrent_weights"]).T),
                    f"{node.name}.recurrent_weights_t")
    a_mem, v_leak = _param(b, node, "dt_tau_mem_inv"), _param(b, node, "v_leak")
    neg_a_syn = b.per_channel(-np.asarray(node.params["dt_tau_syn_inv"]), node.type.shape,
                              f"{node.name}.neg_dt_tau_syn_inv")
    v_th, v_reset, one = _param(b, node, "threshold"), _param(b, node, "v_reset"), b.const(1.0, "one")
    v = b.state(node, "v", v_leak, node.params["v_leak"])
    i = b.state(node, "i", b.const(0.0, "zero"))
    z, out = None, {"spikes": [], "v": [], "i": []}
    for t, xt in enumerate(steps):
        with b.scope(f"{node.name}/t{t}"):
            u = b.op("MatMul", [xt, w_in], hint=f"{node.name}/t{t}/input")                # linear(x, W_in)
            if z is None:                                                                  # the previous spikes
                z = b.state(node, "z", lambda u=u: _zeros_like(b, u, f"{node.name}/z0"))
            rec = b.op("MatMul", [z, w_rec], hint=f"{node.name}/t{t}/rec")                # linear(z, W_rec)
            i_jump = b.add(b.add(i, u), rec)                                               # i + W_in x + W_rec z
            v_new = b.add(v, b.mul(a_mem, b.add(b.sub(v_leak, v), i_jump)))              # v + a_mem ((v_leak - v) + i')
            i = b.add(i_jump, b.mul(neg_a_syn, i_jump))                                    # i' + (-a_syn) i'
            z = _greater(b, v_new, v_th)                                                   # (v~ - v_th > 0)
            v = b.add(b.mul(b.sub(one, z), v_new), b.mul(z, v_reset))                     # (1 - z) v~ + z v_reset
        out["spikes"].append(z)
        out["v"].append(v)
        out["i"].append(i)
    for k, value in (("v", v), ("i", i), ("z", z)):
        b.update_state(node, k, value)
    return out


@emitter("lif_recurrent_norse")
def lif_recurrent_norse(b: Builder, node: Node, x: str) -> str:
    """Norse ``LIFRecurrentCell`` / ``LIFRecurrent``; ``read`` spikes, v or i."""
    return _sequences(b, node, x, _norse_recurrent_dynamics, "spikes")


# -- Norse's adaptive neurons (spikec/frontend/norse_adaptive.py) ---------------------------------------
class _NorseInput:
    """``i + x`` (feed-forward) or ``i + linear(x, W_in) + linear(z, W_rec)`` with the previous spikes ``z`` a
    state (the recurrent variants), as ONNX nodes."""

    def __init__(self, b: Builder, node: Node):
        self.b, self.node, self.z = b, node, None
        p = node.params
        self.w = None if "input_weights" not in p else tuple(
            b.const(np.ascontiguousarray(np.asarray(p[k]).T), f"{node.name}.{k}_t") for k in
            ("input_weights", "recurrent_weights"))

    def add(self, i: str, xt: str, t: int) -> str:
        b, node = self.b, self.node
        if self.w is None:
            return b.add(i, xt)                                                            # i + x
        u = b.op("MatMul", [xt, self.w[0]], hint=f"{node.name}/t{t}/input")              # linear(x, W_in)
        if self.z is None:
            self.z = b.state(node, "z", lambda: _zeros_like(b, u, f"{node.name}/z0"))
        return b.add(b.add(i, u), b.op("MatMul", [self.z, self.w[1]], hint=f"{node.name}/t{t}/rec"))

    def zeros(self, xt: str) -> str:
        """Zeros shaped as a step of the output ``[1, B, *shape]``, from the first step ``xt``."""
        b, node = self.b, self.node
        like = xt if self.w is None else b.op("MatMul", [xt, self.w[0]], hint=f"{node.name}/shape")
        return _zeros_like(b, like, f"{node.name}/i0")

    def spikes(self, z: str) -> None:
        if self.w is not None:
            self.z = z

    def update(self) -> None:
        if self.w is not None:
            self.b.update_state(self.node, "z", self.z)


def _adex_exp(b: Builder, v: str, delta_t: str, v_th: str) -> str:
    return b.mul(delta_t, b.op("Exp", [b.op("Div", [b.sub(v, v_th), delta_t])]))    # delta_T exp((v - v_th) / delta_T)


def _adex_dynamics(b: Builder, node: Node, steps: list[str]) -> dict:
    """``lif_adex_norse_kernel``. With ``dv_exp_rest`` (LIFAdExCell), the exponential of each step is a state
    computed at the end of the step before, starting at ``dv_exp_rest``: the stream's first step uses it too."""
    c = {k: _param(b, node, k) for k in ("dt_tau_mem_inv", "dt_tau_ada_inv", "delta_T", "v_leak", "threshold",
                                         "v_reset", "adaptation_current", "adaptation_spike")}
    neg_a_syn = b.per_channel(-np.asarray(node.params["dt_tau_syn_inv"]), node.type.shape,
                              f"{node.name}.neg_dt_tau_syn_inv")
    rest, one, zero = "dv_exp_rest" in node.params, b.const(1.0, "one"), b.const(0.0, "zero")
    drive = _NorseInput(b, node)
    v = b.state(node, "v", c["v_leak"], node.params["v_leak"])
    i, a = b.state(node, "i", zero), b.state(node, "a", zero)
    e = b.state(node, "e", _param(b, node, "dv_exp_rest"), node.params["dv_exp_rest"]) if rest else None
    out = {"spikes": [], "v": [], "i": [], "a": []}
    for t, xt in enumerate(steps):
        with b.scope(f"{node.name}/t{t}"):
            i_jump = drive.add(i, xt, t)
            dv_exp = e if rest else _adex_exp(b, v, c["delta_T"], c["threshold"])
            total = b.sub(b.add(b.add(b.sub(c["v_leak"], v), dv_exp), i_jump), a)    # ((v_leak - v) + e + i') - a
            v_new = b.add(v, b.mul(c["dt_tau_mem_inv"], total))
            i = b.add(i_jump, b.mul(neg_a_syn, i_jump))
            a_new = b.add(a, b.mul(c["dt_tau_ada_inv"], b.sub(b.mul(c["adaptation_current"],
                                                                      b.sub(v, c["v_leak"])), a)))
            z = _greater(b, v_new, c["threshold"])
            v = b.add(b.mul(b.sub(one, z), v_new), b.mul(z, c["v_reset"]))
            a = b.add(a_new, b.mul(z, c["adaptation_spike"]))
            drive.spikes(z)
            if rest:
                e = _adex_exp(b, v, c["delta_T"], c["threshold"])
        for k, value in zip(("spikes", "v", "i", "a"), (z, v, i, a)):
            out[k].append(value)
    for k, value in (("v", v), ("i", i), ("a", a), ("e", e)):
        if value is not None:
            b.update_state(node, k, value)
    drive.update()
    return out


def _lsnn_dynamics(b: Builder, node: Node, steps: list[str]) -> dict:
    """``lsnn_norse_kernel``: the input enters the current after the spike."""
    c = {k: _param(b, node, k) for k in ("dt_tau_mem_inv", "dt_tau_adapt_inv", "v_leak", "threshold", "v_reset",
                                         "beta")}
    neg_a_syn = b.per_channel(-np.asarray(node.params["dt_tau_syn_inv"]), node.type.shape,
                              f"{node.name}.neg_dt_tau_syn_inv")
    one, drive = b.const(1.0, "one"), _NorseInput(b, node)
    v = b.state(node, "v", c["v_leak"], node.params["v_leak"])
    i = b.state(node, "i", lambda: drive.zeros(steps[0]))  # the step's shape: step 0 reads constants only
    th = b.state(node, "b", c["threshold"], node.params["threshold"])
    out = {"spikes": [], "v": [], "i": [], "b": []}
    for t, xt in enumerate(steps):
        with b.scope(f"{node.name}/t{t}"):
            v_new = b.add(v, b.mul(c["dt_tau_mem_inv"], b.add(b.sub(c["v_leak"], v), i)))   # v + a_mem (..)
            i_new = b.add(i, b.mul(neg_a_syn, i))                                             # i + (-a_syn) i
            th_new = b.add(th, b.mul(c["dt_tau_adapt_inv"], b.sub(c["threshold"], th)))   # b + a_adapt (v_th - b)
            z = _greater(b, v_new, th_new)                                                    # (v~ - b~ > 0)
            v = b.add(b.mul(b.sub(one, z), v_new), b.mul(z, c["v_reset"]))
            i = drive.add(i_new, xt, t)                                                       # uses the previous z
            th = b.add(th_new, b.mul(z, c["beta"]))
            drive.spikes(z)
        for k, value in zip(("spikes", "v", "i", "b"), (z, v, i, th)):
            out[k].append(value)
    for k, value in (("v", v), ("i", i), ("b", th)):
        b.update_state(node, k, value)
    drive.update()
    return out


@emitter("lif_adex_norse")
def lif_adex_norse(b: Builder, node: Node, x: str) -> str:
    """Norse ``LIFAdExCell`` / ``LIFAdEx`` (and recurrent); ``read`` spikes, v, i or a."""
    return _sequences(b, node, x, _adex_dynamics, "spikes")


@emitter("lsnn_norse")
def lsnn_norse(b: Builder, node: Node, x: str) -> str:
    """Norse ``LSNNCell`` / ``LSNN`` (and recurrent); ``read`` spikes, v, i or b."""
    return _sequences(b, node, x, _lsnn_dynamics, "spikes")
