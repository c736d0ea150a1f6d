"""Quantize a float spikec graph to Loihi 2 fixed point: the integer reference graph.

Mapping (one *layer* = a synaptic expression and the neuron or read-out it feeds):

    float   U = beta*H + alpha*(A(s) + b) + bias,   S = [U >= theta]
    fixed   v = decay(v, dv) + (a << 6) + (bias_mant << bias_exp),  S = [v > vth << 6],  a = Wq s

``A`` is the layer's linear operator on the incoming spikes: a conv2d or linear, with an adjacent
2-D average pool folded in exactly (conv -> avgpool, avgpool -> conv, avgpool -> flatten -> linear;
Lava has no pooling process). Per output channel ``c`` the integer membrane is ``v ~ 64 s_c U``
with ``s_c = VTH / theta_c`` (threshold-normalized: one integer threshold VTH for the whole
population, so Lava's scalar-``vth`` LIF can run per-channel thresholds exactly):

- weights ``Wq = round(s_c alpha_c W)``: 8-bit magnitude + sign mode (mixed [-128, 127];
  single-sign [0, 255] or [-255, 0]); VTH is the largest integer keeping ``Wq`` in range,
  then lowered by calibration until the observed states keep ``headroom_bits`` below 24 bits;
- ``dv = round(4096 (1 - beta))`` (12 bits; ``beta = 0`` leaves a 1/4096 residual), ``du = 4095``
  (spikec neurons carry no synaptic current: ``u = a << 6`` each step);
- bias ``round(64 s_c (alpha_c b + bias_c))`` as a 13-bit mantissa and a 3-bit exponent.

Graph outputs that are synaptic expressions (a linear head) become ``lava_readout`` nodes with
one scale ``s`` for the whole layer (so logits stay comparable): ``y ~ s * y_float``.
Anything else is refused with the node named (no silent partial mapping).
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.compiler.errors import UnsupportedOp
from spikec.compiler.interpreter import run
from spikec.compiler.ir import Graph, Node, TensorType
from spikec.compiler.ops import _window
from spikec.targets.lava import ops as lops

VTH_MAX = 2 ** 17 - 1          # LIF vth: unsigned 17-bit mantissa
BIAS_MANT = (-4096, 4095)      # 13-bit signed
BIAS_EXP_MAX = 7               # 3-bit
DECAY_MAX = 4095               # 12-bit
HEADROOM_BITS = 1              # calibrated states stay below 2^(23 - HEADROOM_BITS)
MAPPED = ("input", "lif", "conv2d", "linear", "flatten", "avgpool2d")
NO_MAPPING = {
    "silif": "SiLIF needs a custom fixed_pt process, not implemented (no host partition either)",
    "csilif": "CSiLIF needs a custom fixed_pt process, not implemented (no host partition either)",
    "intfire": "the integer-firing neuron needs a graded-payload process, not implemented",
    "intfire_unrolled": "the unrolled integer neuron needs a sub-step schedule, not implemented",
    "dsmpa": "a dense op (DS-MPA): it would need a host partition, not implemented",
    "bntt": "per-time-step BN has no static fixed-point form (fold it first), no host partition",
    "batchnorm": "an unfolded BatchNorm (fold_batchnorm declined it)",
    "maxpool2d": "max pooling has no Lava process (an OR neuron layer would add latency), not implemented",
    "delay": "Delay nodes (DelayDense) are not implemented",
    "tdm": "TDM has no static fixed-point form here (run tdm_dual_kernel first)",
}
SUPPORTED = "input (binary or integer spikes), lif, conv2d, linear, flatten, avgpool2d folded into an adjacent " \
            "conv2d/linear"


def refuse(node: Node, why: str) -> UnsupportedOp:
    return UnsupportedOp(f"the Lava target cannot map node {node.name!r} ({node.op}): {why}",
                         where=f"node {node.name!r}" + (f", module {node.scope!r}" if node.scope else ""),
                         remedy=f"the Lava target maps: {SUPPORTED}; use --target none (or another target) "
                                "for this model")


# -- float linear operators (folding pools) ----------------------------------------------
@dataclass
class Operator:
    """``A(x) + b`` on the spike source ``src`` (per-sample shape ``in_shape``), float64."""
    kind: str                          # "conv" | "dense"
    weight: np.ndarray                 # conv (C_out, C_in/g, kH, kW) PyTorch layout; dense (N_out, N_in)
    bias: np.ndarray                   # (C_out,)
    src: str                           # spike source node (input or lif)
    in_shape: tuple
    out_shape: tuple
    attrs: dict = field(default_factory=dict)   # conv: stride, padding, dilation, groups
    flatten: bool = False              # dense over a flattened (C, H, W) source
    nodes: list = field(default_factory=list)   # float nodes this operator replaces, in order
    notes: list = field(default_factory=list)


def fold_conv_then_pool(w, stride, padding, dilation, k, s):
    """Composite kernel of avgpool(k, s) after conv: kernel ``st*(k-1) + d*(kw-1) + 1``, stride ``st*s``."""
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    ch, cw = sh * (k[0] - 1) + dh * (kh - 1) + 1, sw * (k[1] - 1) + dw * (kw - 1) + 1
    out = np.zeros(w.shape[:2] + (ch, cw))
    for i in range(k[0]):
        for j in range(k[1]):
            for m in range(kh):
                for n in range(kw):
                    out[:, :, sh * i + dh * m, sw * j + dw * n] += w[:, :, m, n]
    return out / (k[0] * k[1]), (sh * s[0], sw * s[1]), tuple(padding), (1, 1)


def fold_pool_then_conv(w, stride, padding, dilation, k):
    """Composite kernel of conv after a non-overlapping avgpool(k, stride k): every tap spread over k x k."""
    kh, kw = w.shape[2:]
    dh, dw = dilation
    out = np.zeros(w.shape[:2] + (k[0] * (dh * (kh - 1) + 1), k[1] * (dw * (kw - 1) + 1)))
    for m in range(kh):
        for n in range(kw):
            for i in range(k[0]):
                for j in range(k[1]):
                    out[:, :, k[0] * dh * m + i, k[1] * dw * n + j] += w[:, :, m, n]
    return (out / (k[0] * k[1]), (stride[0] * k[0], stride[1] * k[1]),
            (padding[0] * k[0], padding[1] * k[1]), (1, 1))


def _pool_ok(pool: Node, in_shape, non_overlapping: bool) -> str | None:
    a = pool.attrs
    if tuple(a["padding"]) != (0, 0):
        return "pool padding is not folded"
    if a.get("ceil_mode"):
        return "ceil_mode pooling is not folded"
    if tuple(a.get("dilation", (1, 1))) != (1, 1):
        return "dilated pooling is not folded"
    if non_overlapping and (tuple(a["kernel"]) != tuple(a["stride"]) or in_shape[1] % a["kernel"][0]
                            or in_shape[2] % a["kernel"][1]):
        return "only a non-overlapping pool (kernel == stride) that tiles its input folds into the next synapse"
    return None


def operator_of(graph: Graph, node: Node) -> Operator:
    """The float linear operator computing ``node`` from a spike source, pools folded; refuses otherwise."""
    post_pool = None
    syn = node
    if syn.op == "avgpool2d":
        post_pool, syn = syn, graph.node(syn.inputs[0])
    if syn.op not in ("conv2d", "linear"):
        raise refuse(node if post_pool is None else post_pool,
                     "a neuron or output must be fed by a conv2d or linear (optionally with an avgpool2d)")
    chain, src = [], graph.node(syn.inputs[0])
    while src.op in ("flatten", "avgpool2d"):
        chain.insert(0, src)
        src = graph.node(src.inputs[0])
    if src.op not in ("input", "lif") or src.attrs.get("output", "spikes") != "spikes":
        raise refuse(src, "a synapse's input must be spikes (the graph input or a lif neuron)")
    w = np.array(syn.params["weight"], dtype=np.float64)
    b = np.array(syn.params["bias"], dtype=np.float64) if "bias" in syn.params else np.zeros(w.shape[0])
    in_shape = src.type.shape
    nodes = [*chain, syn] + ([post_pool] if post_pool is not None else [])
    notes = []
    if syn.op == "conv2d":
        a = dict(stride=tuple(syn.attrs["stride"]), padding=tuple(syn.attrs["padding"]),
                 dilation=tuple(syn.attrs["dilation"]), groups=syn.attrs["groups"])
        if [c.op for c in chain] not in ([], ["avgpool2d"]):
            raise refuse(chain[-1], "only a single avgpool2d may sit between spikes and a conv2d")
        if chain:
            pool = chain[0]
            why = _pool_ok(pool, in_shape, True)
            if why:
                raise refuse(pool, why)
            w, stride, pad, dil = fold_pool_then_conv(w, a["stride"], a["padding"], a["dilation"], pool.attrs["kernel"])
            a.update(stride=stride, padding=pad, dilation=dil)
            notes.append(f"avgpool {pool.name!r} folded into the following conv {syn.name!r}: kernel "
                         f"{tuple(w.shape[2:])}, stride {stride}, padding {pad} (exact in real arithmetic)")
        out_shape = syn.type.shape
        if post_pool is not None:
            why = _pool_ok(post_pool, syn.type.shape, False)
            if why:
                raise refuse(post_pool, why)
            k, s = tuple(post_pool.attrs["kernel"]), tuple(post_pool.attrs["stride"])
            w, stride, pad, dil = fold_conv_then_pool(w, a["stride"], a["padding"], a["dilation"], k, s)
            out_shape = post_pool.type.shape
            h = _window(in_shape[1], w.shape[2], stride[0], pad[0], 1)
            wd = _window(in_shape[2], w.shape[3], stride[1], pad[1], 1)
            if (h, wd) != tuple(out_shape[1:]):
                raise refuse(post_pool, f"folding it into conv {syn.name!r} gives a {h}x{wd} map, not "
                                        f"{out_shape[1]}x{out_shape[2]}")
            a.update(stride=stride, padding=pad, dilation=dil)
            notes.append(f"avgpool {post_pool.name!r} folded into the preceding conv {syn.name!r}: kernel "
                         f"{tuple(w.shape[2:])}, stride {stride}, padding {pad} (exact in real arithmetic)")
        return Operator("conv", w, b, src.name, in_shape, out_shape, a, False, nodes, notes)
    # linear
    ops = [c.op for c in chain]
    if ops == []:
        if len(in_shape) != 1:
            raise refuse(syn, f"linear on a {in_shape} tensor (not a vector) is not mapped")
        return Operator("dense", w, b, src.name, in_shape, syn.type.shape, {}, False, nodes, notes)
    flat = chain[-1]
    if flat.op != "flatten" or ops not in (["flatten"], ["avgpool2d", "flatten"]):
        raise refuse(chain[-1], "only flatten, or avgpool2d then flatten, may sit between spikes and a linear")
    if flat.type.shape != (int(np.prod(flat.type.shape)),) or len(in_shape) != 3 and ops[0] == "avgpool2d":
        raise refuse(flat, "flatten must produce a vector")
    if ops[0] == "avgpool2d":
        pool = chain[0]
        why = _pool_ok(pool, in_shape, True)
        if why:
            raise refuse(pool, why)
        kh, kw = pool.attrs["kernel"]
        c, hp, wp = pool.type.shape
        w4 = w.reshape(w.shape[0], c, hp, wp) / (kh * kw)
        w = np.repeat(np.repeat(w4, kh, axis=2), kw, axis=3).reshape(w.shape[0], -1)
        notes.append(f"avgpool {pool.name!r} folded into linear {syn.name!r} (weights spread over each "
                     f"{kh}x{kw} window; exact in real arithmetic)")
    return Operator("dense", w, b, src.name, in_shape, syn.type.shape, {}, len(in_shape) > 1, nodes, notes)


# -- fixed point ------------------------------------------------------------------------
def weight_range(w: np.ndarray) -> tuple[int, int, str]:
    mode = "excitatory" if w.min() >= 0 else "inhibitory" if w.max() <= 0 else "mixed"
    return {"excitatory": (0, 255, mode), "inhibitory": (-255, 0, mode), "mixed": (-128, 127, mode)}[mode]


def bias_mant_exp(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Integer biases as mantissa << exponent; returns (mant, exp, number saturated)."""
    b = np.asarray(b, dtype=np.int64)
    exp = np.zeros_like(b)
    mant = b.copy()
    for e in range(1, BIAS_EXP_MAX + 1):
        big = (mant > BIAS_MANT[1]) | (mant < BIAS_MANT[0])
        if not big.any():
            break
        mant = np.where(big, np.round(b / 2.0 ** e).astype(np.int64), mant)
        exp = np.where(big, e, exp)
    saturated = int(((mant > BIAS_MANT[1]) | (mant < BIAS_MANT[0])).sum())
    return np.clip(mant, *BIAS_MANT), exp, saturated


def _scalar_or_channels(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    return v[:1].reshape(()) if v.size and np.all(v == v.flat[0]) else v


@dataclass
class Layer:
    """One quantized layer: float operator + neuron parameters -> integer nodes."""
    name: str                  # the neuron (or read-out) node: float and integer graph share it
    op: Operator
    neuron: Node | None        # float lif, or None for a read-out
    vth: int = 0               # threshold-normalized VTH (neurons with all thresholds > 0)
    gain: float = 1.0          # weight-range scaling (read-outs, zero thresholds): fraction of the full range
    bias_unit: int = 1         # biases rounded to multiples of this (64 = whole weight LSBs, as netx needs)
    scale: np.ndarray = None   # s_c: integer weight units per float unit, per output channel
    info: dict = field(default_factory=dict)

    @property
    def synapse(self) -> str:
        return next(n.name for n in self.op.nodes if n.op in ("conv2d", "linear"))


def _neuron_params(node: Node, c: int) -> dict:
    return {k: np.broadcast_to(np.array(node.params[k], dtype=np.float64), (c,)).copy()
            for k in ("beta", "alpha", "bias", "threshold", "v_reset")}


def _max_vth(layer: Layer) -> int:
    """The largest VTH keeping every channel's weights in the 8-bit range."""
    p = _neuron_params(layer.neuron, layer.op.out_shape[0])
    w = layer.op.weight * p["alpha"].reshape(-1, *([1] * (layer.op.weight.ndim - 1)))
    lo, hi, _ = weight_range(w)
    per = np.abs(w).reshape(w.shape[0], -1).max(1)
    if (p["threshold"] <= 0).any():
        return 0
    with np.errstate(divide="ignore"):
        lim = np.where(per > 0, max(hi, -lo) * p["threshold"] / np.where(per > 0, per, 1), np.inf)
    return int(max(1, min(VTH_MAX, np.floor(lim.min()) if np.isfinite(lim.min()) else VTH_MAX)))


def quantize_layer(layer: Layer) -> list[Node]:
    """Integer nodes (synapse [+ flatten], neuron or read-out) for ``layer`` at ``layer.vth``."""
    op = layer.op
    c = op.out_shape[0]
    shape_w = (-1,) + (1,) * (op.weight.ndim - 1)
    info = layer.info
    info.clear()
    if layer.neuron is not None:
        p = _neuron_params(layer.neuron, c)
        w = op.weight * p["alpha"].reshape(shape_w)
        b = p["alpha"] * op.bias + p["bias"]
        theta = p["threshold"]
        if (theta < 0).any():
            raise refuse(layer.neuron, "a negative threshold has no Loihi form")
        if ((p["beta"] < 0) | (p["beta"] > 1)).any():
            raise refuse(layer.neuron, "beta outside [0, 1] is not a 12-bit decay")
        if (theta > 0).all():
            scale = layer.vth / theta
            vth = np.full(c, layer.vth, dtype=np.int64)
            info["scaling"] = f"threshold-normalized: s_c = VTH / theta_c, VTH = {layer.vth}"
        else:   # a zero threshold: one weight scale for the population, thresholds rounded
            scale = np.full(c, _full_range(w) * layer.gain)
            vth = np.round(scale * theta).astype(np.int64)
            info["scaling"] = f"weight-range (a threshold is 0): one scale for the population, gain {layer.gain:.3g}"
    else:
        w, b = op.weight, op.bias
        scale = np.full(c, _full_range(w) * layer.gain)
        info["scaling"] = "one scale for the read-out layer: y_int ~ s * y_float"
    layer.scale = scale
    lo, hi, mode = weight_range(w)
    wq_f = np.round(w * scale.reshape(shape_w))
    wq = np.clip(wq_f, lo, hi).astype(np.int64)
    info.update(sign_mode=mode, weight_range=[lo, hi], weights_clipped=int((wq != wq_f).sum()),
                weight_rms_error=float(np.sqrt(np.mean((wq / scale.reshape(shape_w) - w) ** 2))) if w.size else 0.0)
    syn_name = layer.synapse if layer.synapse != layer.name else layer.name + ".synapse"
    nodes = []
    src_name, src_type = op.src, None
    if op.kind == "conv":
        nodes.append(Node(syn_name, "lava_conv", (src_name,), TensorType(op.out_shape),
                          dict(op.attrs, num_message_bits=0), {"weight": wq}, scope=layer.name))
    else:
        if op.flatten:
            flat_name = next((n.name for n in op.nodes if n.op == "flatten"), syn_name + ".flatten")
            nodes.append(Node(flat_name, "flatten", (src_name,), TensorType((int(np.prod(op.in_shape)),), "binary"),
                              {"start": 0, "end": -1}))
            src_name = flat_name
        if mode == "mixed":   # Lava truncates the LSB of mixed-sign 8-bit weights: 2w with weight_exp -1 is exact
            emitted, wexp = 2 * wq, -1
        else:
            emitted, wexp = wq, 0
        nodes.append(Node(syn_name, "lava_dense", (src_name,), TensorType(op.out_shape),
                          {"weight_exp": wexp, "num_message_bits": 0}, {"weight": emitted}, scope=layer.name))
    if layer.neuron is None:
        bq = np.round(b * scale).astype(np.int64)
        nodes.append(Node(layer.name, "lava_readout", (syn_name,), TensorType(op.out_shape), {}, {"bias": bq},
                          scope=layer.name))
        info.update(scale=float(scale[0]))
        return nodes
    bias_v = np.round(64 * scale * b / layer.bias_unit) * layer.bias_unit
    mant, exp, sat = bias_mant_exp(bias_v)
    dv_f = np.round(4096 * (1 - p["beta"]))
    dv = np.clip(dv_f, 0, DECAY_MAX).astype(np.int64)
    hard = layer.neuron.attrs["reset"] == "zero"
    v_reset = np.round(64 * scale * p["v_reset"]).astype(np.int64)
    params = {"du": np.int64(4095), "dv": _scalar_or_channels(dv), "vth": _scalar_or_channels(vth),
              "bias_mant": mant, "bias_exp": exp}
    if hard and (v_reset != 0).any():
        params["v_reset"] = _scalar_or_channels(v_reset)
    lava_lif = hard and "v_reset" not in params and params["dv"].ndim == 0 and params["vth"].ndim == 0 \
        and int(params["vth"]) <= VTH_MAX
    nodes.append(Node(layer.name, "lava_lif", (syn_name,), TensorType(op.out_shape, "binary"),
                      {"reset": layer.neuron.attrs["reset"], "output": "spikes",
                       "process": "LIF" if lava_lif else "SpikecLIF"}, params, scope=layer.name))
    info.update(process="LIF" if lava_lif else "SpikecLIF", vth=params["vth"].tolist(), dv=params["dv"].tolist(),
                du=4095, reset=layer.neuron.attrs["reset"], bias_saturated=sat,
                bias_exp_max=int(exp.max(initial=0)), scale=scale.tolist() if np.ptp(scale) else float(scale[0]),
                beta_effective=(1 - params["dv"] / 4096).tolist())
    if (p["beta"] == 0).any():
        info.setdefault("notes", []).append("beta = 0 maps to dv = 4095: 1/4096 of v survives a step")
    return nodes


def _full_range(w: np.ndarray) -> float:
    """The scale mapping the largest |weight| onto the edge of the 8-bit range."""
    lo, hi, _ = weight_range(w)
    mx = float(np.abs(w).max(initial=0))
    return max(hi, -lo) / mx if mx > 0 else 1.0


@dataclass
class Quantized:
    graph: Graph                      # the integer reference graph
    layers: list                      # Layer, in order
    calibration: dict
    notes: list


def build_layers(graph: Graph) -> list[Layer]:
    """The layers of ``graph``: every lif and every synaptic graph output; refuses what cannot map."""
    layers, used = [], set()
    for n in graph.nodes:   # first the ops with no mapping at all, so the refusal names them
        if n.op not in MAPPED:
            raise refuse(n, NO_MAPPING.get(n.op, "no Loihi mapping in this target"))
    for inp in graph.inputs:
        if inp.type.kind == "real":
            raise refuse(inp, "real-valued inputs are not mapped; feed spikes (binary or integer)")
        if inp.type.substeps != 1:
            raise refuse(inp, "sub-step time bases are not mapped")
    outputs = set(graph.outputs)
    for n in graph.nodes:
        if n.op == "lif":
            if n.attrs.get("output", "spikes") != "spikes":
                if n.name in outputs or graph.consumers(n.name):
                    raise refuse(n, "a membrane read-out is not deployable on Loihi")
                continue
            op = operator_of(graph, graph.node(n.inputs[0]))
            layers.append(Layer(n.name, op, n))
            used.update(x.name for x in op.nodes)
        elif n.name in outputs and n.op in ("conv2d", "linear", "avgpool2d"):
            op = operator_of(graph, n)
            layers.append(Layer(n.name, op, None))
            used.update(x.name for x in op.nodes)
    for n in graph.nodes:   # everything else must be a spike source, a folded node or a spike output
        if n.op in ("input", "lif") or n.name in used:
            continue
        if n.op == "flatten" and n.name in outputs and graph.node(n.inputs[0]).op == "lif":
            continue   # a flattened spike output: the population's spikes, reshaped
        raise refuse(n, "it is neither part of a synapse feeding a neuron or a read-out, nor a spike output")
    for n in graph.nodes:
        if n.name in used and n.name in outputs and not any(l.name == n.name for l in layers):
            raise refuse(n, "an intermediate of a folded synapse cannot be a graph output")
        if n.name in used and any(c.name not in used for c in graph.consumers(n.name)) \
                and not any(l.name == n.name for l in layers):
            bad = next(c for c in graph.consumers(n.name) if c.name not in used)
            if bad.op != "lif":
                raise refuse(n, f"its value is also read by {bad.name!r}; a folded synapse must have one consumer")
    return layers


def assemble(graph: Graph, layers: list[Layer]) -> Graph:
    nodes = [Node(i.name, "input", (), i.type) for i in graph.inputs]
    for layer in layers:
        nodes += quantize_layer(layer)
    names = {n.name for n in nodes}
    outputs = []
    for o in graph.outputs:
        node = graph.node(o)
        if o in names:
            outputs.append(o)
        elif node.op == "flatten":
            nodes.append(Node(o, "flatten", (node.inputs[0],), node.type, dict(node.attrs)))
            outputs.append(o)
    scales = {l.name: (float(l.scale[0]) if np.ptp(l.scale) == 0 else [float(v) for v in l.scale]) for l in layers}
    return Graph(tuple(nodes), tuple(outputs), {
        "quantized_for": "lava", "source_outputs": list(graph.outputs),
        "scales": scales,   # integer units per float unit: read-out y_float ~ y_int / scale; membranes v ~ 64 scale U
    })


def with_readouts(qgraph: Graph, what=("v", "u", "flags")) -> Graph:
    """``qgraph`` plus state read-out twins ``<neuron>.<v|u|flags>`` of every lava_lif (same dynamics run)."""
    nodes = []
    for n in qgraph.nodes:
        nodes.append(n)
        if n.op == "lava_lif":
            for w in what:
                nodes.append(n.with_(name=f"{n.name}.{w}", attrs=dict(n.attrs, output=w), type=TensorType(n.type.shape)))
    return Graph(tuple(nodes), qgraph.outputs, qgraph.meta)


def measure(q: Graph, x) -> tuple[dict, "Trace"]:
    """Run the integer reference with state read-outs; per neuron layer: peak |state|, overflow events."""
    trace = run(with_readouts(q), x, integer=True)
    peaks = {}
    for n in q.nodes:
        if n.op != "lava_lif":
            continue
        eff = int(np.max(np.array(n.params["vth"]))) << 6
        peak = max(int(np.abs(trace.values[n.name + ".v"]).max(initial=0)),
                   int(np.abs(trace.values[n.name + ".u"]).max(initial=0)),
                   int(trace.margins[n.name].max(initial=0)) + eff)
        flags = trace.values[n.name + ".flags"]
        peaks[n.name] = {"peak_state": peak, "headroom_bits": round(float(np.log2(lops.M / max(peak, 1))), 3),
                         "u_wrapped": int(((flags & lops.FLAG_U_WRAP) != 0).sum()),
                         "v_saturated": int(((flags & lops.FLAG_V_SAT) != 0).sum()),
                         "input_overflow": int(((flags & lops.FLAG_ACT) != 0).sum())}
        peaks[n.name]["overflow_events"] = int((flags != 0).sum())
    return peaks, trace


def quantize(graph: Graph, calib_inputs, *, headroom_bits: int = HEADROOM_BITS, max_rounds: int = 8,
             vth_override: dict | None = None, bias_unit: int = 1) -> Quantized:
    """Quantize ``graph``; scales from the weights, then lowered until ``calib_inputs`` keep headroom.

    ``bias_unit=64`` rounds every neuron bias to whole weight LSBs (netx fixes the bias exponent at 6).
    """
    layers = build_layers(graph)
    for layer in layers:
        layer.bias_unit = bias_unit
    notes = [n for l in layers for n in l.op.notes]
    for layer in layers:
        layer.vth = _max_vth(layer) if layer.neuron is not None else 0
        if vth_override and layer.name in vth_override:
            layer.vth = int(vth_override[layer.name])
    limit = 2 ** (lops.STATE_BITS - 1 - headroom_bits)
    x = {i.name: np.asarray(calib_inputs[i.name] if isinstance(calib_inputs, dict) else calib_inputs)
         for i in graph.inputs}
    rounds = 0
    while True:
        q = assemble(graph, layers)
        peaks, _ = measure(q, x)
        rounds += 1
        changed = False
        for layer in layers:
            m = peaks.get(layer.name)
            if m is None or (vth_override and layer.name in vth_override) or rounds >= max_rounds:
                continue
            if m["peak_state"] > limit or m["overflow_events"]:
                factor = min(limit / max(m["peak_state"], 1), 0.5 if m["overflow_events"] else 1.0)
                if layer.vth > 1:
                    layer.vth = max(1, int(layer.vth * factor))
                    changed = True
                elif layer.vth == 0 and layer.gain > 1e-3:
                    layer.gain *= factor
                    changed = True
        if not changed:
            break
    first = next(iter(x.values()))
    calibration = {"inputs": "the verification inputs", "samples": int(first.shape[1]), "steps": int(first.shape[0]),
                   "rounds": rounds, "headroom_bits_target": headroom_bits, "state_limit": limit,
                   "bias_unit": bias_unit,
                   "per_layer": peaks,
                   "overflow": any(p["overflow_events"] for p in peaks.values())}
    return Quantized(q, layers, calibration, notes)
