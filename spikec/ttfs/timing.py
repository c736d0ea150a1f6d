"""TTFS timing assignment (passes.md "TTFS timing assignment", semantics.md 1.4).

From a traced ANN (Linear/Conv with bias, ReLU, shift-ReLU, identity, average pooling, flatten,
BatchNorm, scalar affine, residual additions, element-wise products, LayerNorm decomposed first by
``spikec.ttfs.layernorm``) to a TTFS graph in the IR.

1. **Structure.** Walk the ANN in order. Every value is either *materialised* -- a TTFS layer whose
   neurons spike once -- or an *affine expression* ``sum_g Chain_g(layer_g) + bias`` over materialised
   layers (``Chain_g``: the linear parts of the ops in between, e.g. avgpool -> conv). A ReLU
   materialises a B1 layer, a shift-ReLU (``relu(x + s) - s``) or a graph output an R-TTFS layer, a
   product a product layer; so pooling, flatten, BatchNorm, scalar affines and residual additions are
   folded into the synapses of the layer that consumes them (exact: they are linear).
2. **Calibration.** The ANN runs on calibration inputs; each layer's activation range fixes its scale
   ``a_n`` (ReLU is positively homogeneous: layer ``n`` computes ``a_n h_n``, its synapses from layer
   ``m`` carry ``(a_n / a_m) W``), so that ``a_n max h_n`` fills the window.
3. **Timing.** ``t_min(n) = max over sources m of t_max(m)`` (``= t_max(n-1)`` in a chain),
   ``t_max(n) = t_min(n) + T_w(n)``; the reference ``t_ref(n) = t_min(n) + U_n`` (``U = T_w`` for B1,
   ``T_w / 2`` -- the midpoint -- for R-TTFS). A value is ``x = t_ref - t`` in ``[-L_n, U_n]`` with
   ``L = t_max - t_ref``. A source whose window ends before ``t_min(n)`` is delayed by
   ``t_min(n) - t_max(m)`` (residual alignment: both operands of an addition arrive in the window just
   before ``t_min(n)``).
4. **Thresholds.** Integrating the B1 dynamics, input ``j`` of layer ``m`` (spike at ``t_j``, delayed by
   ``d``) has charged ``q_j = t_min(n) - t_j - d = L_m + x_j`` at the window start, so
   ``tau V(t_min) = sum_j W'_ij (L_m + x_j)`` and the ramp crosses ``theta_i`` at
   ``t_i = t_min + tau theta_i - tau V(t_min)``. With
   ``tau theta_i = sum_j W'_ij L_m + U_n - b'_i`` the value is ``t_ref - t_i = sum_j W'_ij x_j + b'_i``,
   clipped to ``[-L_n, U_n]``: for B1 sources (``L_m = 0``) ``tau theta = T_w - b``, for R-TTFS
   (``L_m = L_n = Delta``) ``tau theta = sum_j W_ij Delta + Delta - b`` -- the closed forms of passes.md.
   A shift-ReLU layer puts its reference at ``a s`` above ``t_max`` (lower clip = the shift, exact).
5. **Products** (``x * y``, ``A @ B``): operand A's decoded value is the dynamic weight of operand B's
   spike (``ttfs_dynsyn`` / ``ttfs_dynmatmul``), with a static synapse from A of weight ``-g L_b`` that
   removes B's code offset; then ``tau theta = U - g K L_a L_b`` (``K``: contracted length, 1 element-wise)
   and the value is ``g x_a x_b`` with ``g = a_n / (a_a a_b)``. An operand may be a transpose/reshape of a
   layer (a view of its charges); anything else is first materialised as an identity layer.

Numerical conditioning: a window never covers less than ``KAPPA`` (1e-6) of the largest input
magnitude the layer's synapses can deliver, so float64 rounding stays far below 1e-9 of the window even
when the calibration activations of a layer nearly cancel.
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.compiler.errors import PassError, UnsupportedOp
from spikec.compiler.interpreter import run
from spikec.compiler.ir import Graph, Node, TensorType
from spikec.ops import infer_type
from spikec.compiler.rewrite import sole_consumer
from spikec.compiler.verify import verify

KAPPA = 1e-6
NONNEG = ("relu", "product_relu")
PURE_LINEAR = ("avgpool2d", "flatten", "reshape", "transpose")
VIEWS = ("flatten", "reshape", "transpose")   # index maps: a product operand may be a view of a layer
NO_TTFS = {
    "maxpool2d": ("max-pooling has no TTFS form: a B1/R-TTFS neuron sums weighted, time-shifted inputs and "
                  "a maximum is not a weighted sum", "use average pooling (nn.AvgPool2d), which maps exactly"),
    "softmax": ("softmax has no TTFS form (exponentials and a division)", "end the model with its logits"),
}
SPIKING = ("lif", "intfire", "silif", "csilif", "intfire_unrolled", "lif_snntorch", "lif_sj")


@dataclass
class Term:
    source: int                 # index of the materialised layer
    chain: list                 # ANN-side linear-part nodes applied to the source value, in order


@dataclass
class Expr:
    terms: list
    bias: np.ndarray            # full per-step shape


@dataclass
class Layer:
    index: int
    name: str                   # the ANN node whose value this layer carries
    kind: str                   # input | relu | identity | shift_relu | product_relu | product_identity
    shape: tuple
    expr: Expr | None = None
    shift: float = 0.0
    operands: tuple = ()        # product layers: (layer a, layer b)
    views: tuple = ((), ())     # product layers: view ops (transpose/reshape) applied to each operand
    contract: bool = False      # product layers: a matmul (contracting A's last dim with B's second-last)
    depth: int = 1              # product layers: the length of the contraction (1: element-wise)
    scope: str = ""
    # timing, filled by assign()
    window: float = 0.0
    scale: float = 1.0
    lo: float = 0.0             # -L
    hi: float = 0.0             # U
    t_min: float = 0.0
    t_ref: float = 0.0
    t_max: float = 0.0
    fire: str = ""              # the TTFS node holding this layer's spike times
    delays: dict = field(default_factory=dict)   # source layer -> delay
    stats: dict = field(default_factory=dict)

    @property
    def coding(self) -> str:
        return "B1" if self.lo == 0.0 else "R-TTFS"


@dataclass
class Plan:
    """What the pass decided: the layers in order, which layer each graph output reads, the TTFS graph."""
    ann: Graph
    layers: list
    outputs: list               # (ANN output name, layer index)
    graph: Graph | None = None
    tau: float = 1.0
    notes: list = field(default_factory=list)

    @property
    def latency(self) -> float:
        return max(self.layers[k].t_max for _, k in self.outputs) - self.layers[0].t_min

    def layer(self, name: str) -> Layer:
        return next(l for l in self.layers if l.name == name)


def _where(node: Node) -> str:
    return f"node {node.name!r} ({node.op}{', module ' + repr(node.scope) if node.scope else ''})"


def _refuse(node: Node, why: str, remedy: str):
    raise UnsupportedOp(why, where=_where(node), remedy=remedy)


# -- applying linear parts ------------------------------------------------------------------
def apply_chain(chain, x: np.ndarray) -> np.ndarray:
    """The chain's linear ops applied to ``x`` laid out ``[N, *shape]`` (the reference interpreter's kernels)."""
    if not chain:
        return np.array(x, dtype=np.float64)
    nodes = [Node("chain_in", "input", (), TensorType(tuple(x.shape[1:])))]
    for i, n in enumerate(chain):
        nodes.append(n.with_(name=f"chain_{i}", inputs=(nodes[-1].name,)))
    g = Graph(tuple(nodes), (nodes[-1].name,))
    return run(g, np.asarray(x, dtype=np.float64)[None], record="outputs").values[nodes[-1].name][0]


def _abs_node(n: Node) -> Node:
    params = {k: np.abs(v) for k, v in n.params.items()}
    attrs = dict(n.attrs)
    if n.op == "scale":
        attrs["a"] = abs(attrs["a"])
    return n.with_(params=params, attrs=attrs)


def _channel_shape(v: np.ndarray, shape) -> np.ndarray:
    """A (C,) per-channel vector shaped to broadcast against a per-step shape (C, ...)."""
    return np.asarray(v, dtype=np.float64).reshape((-1,) + (1,) * (len(shape) - 1))


# -- 1. structure -------------------------------------------------------------------------------
def structure(ann: Graph) -> Plan:
    layers: list[Layer] = []
    sym: dict = {}           # ANN node name -> ("mat", layer) | ("expr", Expr)
    mat_cache: dict = {}     # ANN node name -> layer materialised for it
    handled: set = set()

    def new_layer(name, kind, shape, scope="", **kw) -> int:
        layers.append(Layer(len(layers), name, kind, tuple(shape), scope=scope, **kw))
        mat_cache[name] = len(layers) - 1
        return len(layers) - 1

    def as_expr(name) -> Expr:
        s = sym[name]
        if s[0] == "mat":
            return Expr([Term(s[1], [])], np.zeros(ann.node(name).type.shape))
        return s[1]

    def materialize(name, kind) -> int:
        """The layer carrying node ``name``'s value (identity coding unless it already is a layer)."""
        s = sym[name]
        if s[0] == "mat":
            return s[1]
        if name in mat_cache:
            return mat_cache[name]
        node = ann.node(name)
        return new_layer(name, kind, node.type.shape, node.scope, expr=s[1])

    def operand(name):
        """(layer, view chain): a layer, a transpose/reshape of one, or else a new identity layer."""
        s = sym[name]
        if s[0] == "mat":
            return s[1], ()
        e = s[1]
        if len(e.terms) == 1 and not e.bias.any() and all(n.op in VIEWS for n in e.terms[0].chain):
            return e.terms[0].source, tuple(e.terms[0].chain)
        return materialize(name, "identity"), ()

    def linear_step(node, lin, bias_fn):
        e = as_expr(node.inputs[0])
        bias = apply_chain([lin], e.bias[None])[0] if lin is not None else e.bias
        bias = bias_fn(bias)
        terms = [Term(t.source, t.chain + ([lin] if lin is not None else [])) for t in e.terms]
        return ("expr", Expr(terms, np.broadcast_to(bias, node.type.shape).astype(np.float64)))

    for node in ann.nodes:
        op = node.op
        if node.name in handled:
            continue
        if op == "input":
            sym[node.name] = ("mat", new_layer(node.name, "input", node.type.shape))
        elif op in ("linear", "conv2d"):
            lin = node.with_(params={"weight": node.params["weight"]})
            b = node.params.get("bias")
            shape = node.type.shape
            add_b = (lambda x: x) if b is None else (
                (lambda x: x + b) if op == "linear" else (lambda x: x + _channel_shape(b, shape)))
            sym[node.name] = linear_step(node, lin, add_b)
        elif op in PURE_LINEAR:
            sym[node.name] = linear_step(node, node, lambda x: x)
        elif op == "scale":
            a, b = float(node.attrs["a"]), float(node.attrs["b"])
            sym[node.name] = linear_step(node, node.with_(attrs={"a": a, "b": 0.0}), lambda x: x + b)
        elif op == "batchnorm":
            p = node.params
            s = p["gamma"] / np.sqrt(p["var"] + node.attrs["eps"])
            c = p["beta"] - p["mean"] * s
            shape = node.type.shape
            lin = Node(node.name, "ttfs_affine", node.inputs, TensorType(shape),
                       params={"gain": _channel_shape(s, shape)}, scope=node.scope)
            sym[node.name] = linear_step(node, lin, lambda x: x + _channel_shape(c, shape))
        elif op == "ttfs_affine":
            lin = node.with_(params={"gain": node.params["gain"]})
            bias = node.params.get("bias")
            sym[node.name] = linear_step(node, lin, lambda x: x if bias is None else x + bias)
        elif op == "add":
            a, b = as_expr(node.inputs[0]), as_expr(node.inputs[1])
            sym[node.name] = ("expr", Expr(a.terms + b.terms, a.bias + b.bias))
        elif op == "relu" or (op == "ttfs_mat" and node.attrs["activation"] == "relu"):
            shift = _shift_relu(ann, node) if op == "relu" else None
            if shift is not None:
                pre, post, s = shift
                k = new_layer(post.name, "shift_relu", post.type.shape, post.scope, expr=as_expr(pre.inputs[0]),
                              shift=s)
                sym[node.name] = ("expr", Expr([Term(k, [])], np.full(node.type.shape, s)))
                sym[post.name] = ("mat", k)
                handled.add(post.name)
                continue
            s = sym[node.inputs[0]]
            if s[0] == "mat" and layers[s[1]].kind in NONNEG:
                sym[node.name] = s  # ReLU of a non-negative layer is that layer
            else:
                sym[node.name] = ("mat", new_layer(node.name, "relu", node.type.shape, node.scope,
                                                   expr=as_expr(node.inputs[0])))
        elif op == "ttfs_mat":
            s = sym[node.inputs[0]]
            sym[node.name] = s if s[0] == "mat" else ("mat", new_layer(
                node.name, "identity", node.type.shape, node.scope, expr=s[1]))
        elif op in ("mul", "ttfs_bmul", "matmul"):
            (ka, va), (kb, vb) = (operand(i) for i in node.inputs)
            act = node.attrs.get("activation")
            if act is None:
                act = "relu" if layers[ka].kind in NONNEG and layers[kb].kind in NONNEG else "identity"
            sym[node.name] = ("mat", new_layer(node.name, f"product_{act}", node.type.shape, node.scope,
                                               operands=(ka, kb), views=(va, vb), contract=op == "matmul",
                                               depth=ann.node(node.inputs[0]).type.shape[-1] if op == "matmul" else 1))
        elif op == "layernorm":
            _refuse(node, "LayerNorm must be decomposed before timing assignment",
                    "call spikec.ttfs.layernorm.expand_layernorm first (compile_ttfs does)")
        elif op in NO_TTFS:
            _refuse(node, *NO_TTFS[op])
        elif op in SPIKING:
            _refuse(node, f"{op} is a spiking neuron: TTFS timing assignment converts a trained ANN "
                    "(Linear/Conv with bias, ReLU, average pooling, residual additions)",
                    "give the ANN the spiking model was trained from, or compile without --coding ttfs")
        else:
            _refuse(node, f"op {op} has no TTFS form; supported: Linear/Conv (with bias), ReLU, shift-ReLU, "
                    "identity, average pooling, flatten, BatchNorm, scalar affine, residual additions, "
                    "element-wise products, LayerNorm (decomposed, approximate)",
                    "replace it with a supported op (e.g. max-pool -> avg-pool, sigmoid -> ReLU)")
    outputs = []
    for o in ann.outputs:
        outputs.append((o, materialize(o, "identity")))
    for layer in layers:
        if layer.expr is not None and not layer.expr.terms:
            raise PassError(f"layer {layer.name!r} does not depend on the input (a constant)",
                            remedy="remove the constant branch from the model")
    return Plan(ann, layers, outputs)


def _shift_relu(ann: Graph, relu: Node):
    """``(pre, post, s)`` when ``relu`` is the middle of ``scale(+s) -> relu -> scale(-s)``, else None."""
    pre = ann.node(relu.inputs[0])
    post = sole_consumer(ann, relu.name)
    if pre.op != "scale" or post is None or post.op != "scale" or sole_consumer(ann, pre.name) is not relu:
        return None
    s = float(pre.attrs["b"])
    if pre.attrs["a"] != 1.0 or post.attrs["a"] != 1.0 or not s > 0 or float(post.attrs["b"]) != -s:
        return None
    return pre, post, s


# -- 2. calibration --------------------------------------------------------------------------
def calibrate(plan: Plan, calibration: np.ndarray, percentile: float = 100.0) -> None:
    """Activation statistics of every layer's ANN value over the calibration inputs ``[T, B, ...]``."""
    trace = run(plan.ann, calibration, progress=None)
    for layer in plan.layers:
        v = trace.values[layer.name].reshape(-1, *layer.shape) if layer.kind != "input" else \
            np.asarray(calibration, dtype=np.float64).reshape(-1, *layer.shape)
        pick = (lambda a: float(np.percentile(a, percentile))) if percentile < 100 else (lambda a: float(a.max()))
        layer.stats = {"max": pick(v) if v.size else 0.0, "min": float(v.min()) if v.size else 0.0,
                       "max_abs": pick(np.abs(v)) if v.size else 0.0, "samples": int(v.shape[0])}


# -- 3 + 4. timing, thresholds and the TTFS graph ---------------------------------------------
class _Emitter:
    def __init__(self):
        self.nodes: list[Node] = []
        self.types: dict = {}

    def unique(self, name):
        base, k = name, 1
        while name in self.types:
            name, k = f"{base}_{k}", k + 1
        return name

    def add(self, node: Node) -> str:
        name = self.unique(node.name)
        node = node.with_(name=name)
        if node.op != "input":
            node = node.with_(type=infer_type(node, [self.types[i] for i in node.inputs]))
        self.nodes.append(node)
        self.types[name] = node.type
        return name

    def emit(self, name, op, inputs, attrs=None, params=None, scope="") -> str:
        return self.add(Node(name, op, tuple(inputs), TensorType((1,)), attrs or {}, params or {}, scope))


def _window_for(layer: Layer, window: float, headroom: float, floor: float):
    """(scale, lo, hi) of a layer from its calibration statistics (floor: conditioning, in ANN units)."""
    st = layer.stats
    if layer.kind == "input":
        if st["min"] >= 0:
            m = max(headroom * st["max"], floor)
            return (window / m if m > 0 else 1.0), 0.0, window
        m = max(headroom * st["max_abs"], floor)
        return ((window / 2) / m if m > 0 else 1.0), -window / 2, window / 2
    if layer.kind in NONNEG:
        m = max(headroom * max(st["max"], 0.0), floor)
        return (window / m if m > 0 else 1.0), 0.0, window
    if layer.kind == "shift_relu":
        up = max(headroom * max(st["max"], 0.0), floor)
        a = window / (layer.shift + up)
        lo = -a * layer.shift
        return a, lo, window + lo
    m = max(headroom * st["max_abs"], floor)  # identity / product_identity: the R-TTFS midpoint
    return ((window / 2) / m if m > 0 else 1.0), -window / 2, window / 2


def _fold_gain(chain, ratio):
    """The chain with ``ratio`` folded into its first weight (or scale / gain), else one scale appended."""
    if ratio == 1.0:
        return list(chain)
    chain = list(chain)
    for i, n in enumerate(chain):
        if "weight" in n.params:
            chain[i] = n.with_(params={**n.params, "weight": n.params["weight"] * ratio})
            return chain
        if n.op == "scale":
            chain[i] = n.with_(attrs={**n.attrs, "a": n.attrs["a"] * ratio})
            return chain
        if n.op == "ttfs_affine":
            chain[i] = n.with_(params={**n.params, "gain": n.params["gain"] * ratio})
            return chain
    return chain + [Node("gain", "scale", ("x",), TensorType((1,)), {"a": float(ratio), "b": 0.0})]


def assign(plan: Plan, *, window: float = 1.0, tau: float = 1.0, headroom: float = 1.0,
           windows: dict | None = None) -> Plan:
    """Choose scales, windows, delays and thresholds; emit the TTFS graph into ``plan.graph``."""
    if not (window > 0 and tau > 0 and headroom > 0):
        raise PassError(f"window {window}, tau {tau} and headroom {headroom} must be > 0")
    windows = windows or {}
    em = _Emitter()
    layers = plan.layers
    delayed: dict = {}   # (source layer, delay) -> spike node
    charges: dict = {}   # (spike node, t_min) -> charge node
    plan.tau = tau

    def bound(k):  # the largest |value| layer k can carry, in ANN units
        l = layers[k]
        return max(-l.lo, l.hi) / l.scale

    def spikes_at(src, t_min):
        s = layers[src]
        d = t_min - s.t_max
        if d < -1e-12 * max(1.0, abs(t_min)):
            raise PassError(f"layer {s.name!r} ends after its consumer's window starts")
        d = max(d, 0.0)
        node = s.fire
        if d > 0:
            key = (src, d)
            if key not in delayed:
                delayed[key] = em.emit(f"{s.name}.ttfs.delay", "ttfs_delay", [s.fire], {"delay": d})
            node = delayed[key]
        return node, d

    def charge(node, t_min, name):
        key = (node, t_min)
        if key not in charges:
            charges[key] = em.emit(name, "ttfs_charge", [node], {"t_min": t_min})
        return charges[key]

    for layer in layers:
        w = float(windows.get(layer.name, window))
        layer.window = w
        if layer.kind == "input":
            node = plan.ann.node(layer.name)
            em.add(node)
            layer.scale, layer.lo, layer.hi = _window_for(layer, w, headroom, 0.0)
            layer.t_min, layer.t_ref, layer.t_max = 0.0, layer.hi, w
            layer.fire = em.emit(f"{layer.name}.ttfs", "ttfs_encode", [layer.name],
                                 {"t_min": 0.0, "t_ref": layer.t_ref, "t_max": w, "lo": layer.lo, "hi": layer.hi,
                                  "gain": layer.scale})
            continue
        sources = [t.source for t in layer.expr.terms] if layer.expr is not None else list(layer.operands)
        layer.t_min = max(layers[s].t_max for s in sources)
        if layer.expr is not None:
            absin = np.abs(layer.expr.bias)
            for t in layer.expr.terms:
                const = np.full((1, *layers[t.source].shape), bound(t.source))
                absin = absin + apply_chain([_abs_node(n) for n in t.chain], const)[0]
            floor = KAPPA * float(absin.max())
        else:
            floor = KAPPA * bound(layer.operands[0]) * bound(layer.operands[1]) * layer.depth
        layer.scale, layer.lo, layer.hi = _window_for(layer, w, headroom, floor)
        layer.t_ref, layer.t_max = layer.t_min + layer.hi, layer.t_min + w
        prefix = f"{layer.name}.ttfs"
        if layer.expr is not None:
            parts, offset = [], np.zeros(layer.shape)
            for i, t in enumerate(layer.expr.terms):
                src = layers[t.source]
                node, d = spikes_at(t.source, layer.t_min)
                layer.delays[src.name] = d
                x = charge(node, layer.t_min, f"{prefix}.q{i}")
                chain = _fold_gain(t.chain, layer.scale / src.scale)
                for j, n in enumerate(chain):
                    x = em.add(n.with_(name=f"{prefix}.s{i}_{j}", inputs=(x,), scope=n.scope or layer.scope))
                parts.append(x)
                # a value-0 input has charged L_src: its share sum_j W'_ij L_src goes into the threshold
                offset = offset + apply_chain(chain, np.full((1, *src.shape), -src.lo))[0]
            v = parts[0]
            for i, p in enumerate(parts[1:], start=1):
                v = em.emit(f"{prefix}.sum{i}", "add", [v, p])
            theta = (offset + layer.hi - layer.scale * layer.expr.bias) / tau
        else:
            (ka, kb) = layer.operands
            a, b = layers[ka], layers[kb]
            qs = []
            for k, view, tag in ((ka, layer.views[0], "a"), (kb, layer.views[1], "b")):
                node, d = spikes_at(k, layer.t_min)
                layer.delays[layers[k].name] = d
                q = charge(node, layer.t_min, f"{prefix}.q{tag}")
                for j, n in enumerate(view):   # charges are per neuron: a view of them is the operand's view
                    q = em.add(n.with_(name=f"{prefix}.view{tag}{j}", inputs=(q,), scope=n.scope or layer.scope))
                qs.append(q)
            g = layer.scale / (a.scale * b.scale)
            attrs = {"gain": g, "l_a": -a.lo, "l_b": -b.lo}
            v = em.emit(f"{prefix}.dynsyn", "ttfs_dynmatmul" if layer.contract else "ttfs_dynsyn", qs, attrs)
            theta = np.full(layer.shape, (layer.hi - g * layer.depth * a.lo * b.lo) / tau)
        layer.fire = em.emit(prefix, "ttfs_fire", [v],
                             {"t_min": layer.t_min, "t_ref": layer.t_ref, "t_max": layer.t_max, "tau": tau,
                              "scale": layer.scale, "lo": layer.lo, "hi": layer.hi, "activation": layer.kind,
                              "source": layer.name},
                             {"theta": np.broadcast_to(theta, layer.shape)}, scope=layer.scope)
    outs = []
    for name, k in plan.outputs:
        l = layers[k]
        outs.append(em.emit(name, "ttfs_decode", [l.fire], {"t_ref": l.t_ref, "scale": l.scale}, scope=l.scope))
    meta = {"source": plan.ann.meta.get("source", ""), "coding": "ttfs", "tau_c": tau,
            "latency": plan.latency}
    plan.graph = verify(Graph(tuple(em.nodes), tuple(outs), meta), "after TTFS timing assignment")
    return plan


def assign_ttfs_timing(ann: Graph, calibration: np.ndarray, *, window: float = 1.0, tau: float = 1.0,
                       headroom: float = 1.0, percentile: float = 100.0, windows: dict | None = None) -> Plan:
    """The pass: structure, calibration, timing and thresholds; ``plan.graph`` is the TTFS graph."""
    plan = structure(ann)
    calibrate(plan, calibration, percentile)
    return assign(plan, window=window, tau=tau, headroom=headroom, windows=windows)
