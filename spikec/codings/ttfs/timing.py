"""TTFS timing assignment (passes.md "TTFS timing assignment", semantics.md 1.4).

From a traced ANN (Linear/Conv with bias, ReLU, shift-ReLU, identity, average pooling, flatten,
BatchNorm, scalar affine, residual additions, element-wise products, LayerNorm decomposed first by
``spikec.codings.ttfs.layernorm``) to a TTFS graph in the IR.

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

from spikec.ir.errors import PassError, UnsupportedOp
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import facts, infer_type
from spikec.ops.common import bn_scale_shift
from spikec.core.rewrite import sole_consumer
from spikec.core.verify import verify

KAPPA = 1e-6
NONNEG = ("relu", "product_relu")
PURE_LINEAR = ("avgpool2d", "flatten", "reshape", "transpose")
VIEWS = ("flatten", "reshape", "transpose")   # index maps: a product operand may be a view of a layer
NO_TTFS = {
    "maxpool2d": ("max-pooling has no TTFS form: a B1/R-TTFS neuron sums weighted, time-shifted inputs and "
                  "a maximum is not a weighted sum", "use average pooling (nn.AvgPool2d), which maps exactly"),
    "softmax": ("softmax has no TTFS form (exponentials and a division)", "end the model with its logits"),
}
SPIKING = facts("neuron").keys()   # the spiking neurons: their cards' neuron flag, read live


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
class _Walk:
    """One walk over the ANN: the layers so far, and what each ANN value is in terms of them."""

    def __init__(self, ann: Graph):
        self.ann = ann
        self.layers: list[Layer] = []
        self.sym: dict = {}          # ANN node name -> ("mat", layer) | ("expr", Expr)
        self.mat_cache: dict = {}    # ANN node name -> layer materialised for it
        self.handled: set = set()    # nodes mapped by a pattern that starts before them (shift-ReLU)

    def new_layer(self, name, kind, shape, scope="", **kw) -> int:
        self.layers.append(Layer(len(self.layers), name, kind, tuple(shape), scope=scope, **kw))
        self.mat_cache[name] = len(self.layers) - 1
        return len(self.layers) - 1

    def as_expr(self, name) -> Expr:
        s = self.sym[name]
        if s[0] == "mat":
            return Expr([Term(s[1], [])], np.zeros(self.ann.node(name).type.shape))
        return s[1]

    def materialize(self, name, kind) -> int:
        """The layer carrying node ``name``'s value (identity coding unless it already is a layer)."""
        s = self.sym[name]
        if s[0] == "mat":
            return s[1]
        if name in self.mat_cache:
            return self.mat_cache[name]
        node = self.ann.node(name)
        return self.new_layer(name, kind, node.type.shape, node.scope, expr=s[1])

    def operand(self, name):
        """(layer, view chain): a layer, a transpose/reshape of one, or else a new identity layer."""
        s = self.sym[name]
        if s[0] == "mat":
            return s[1], ()
        e = s[1]
        if len(e.terms) == 1 and not e.bias.any() and all(n.op in VIEWS for n in e.terms[0].chain):
            return e.terms[0].source, tuple(e.terms[0].chain)
        return self.materialize(name, "identity"), ()

    def linear_step(self, node, lin, bias_fn):
        """The input's expression with the linear part ``lin`` appended to every term and ``bias_fn`` on the bias."""
        e = self.as_expr(node.inputs[0])
        bias = apply_chain([lin], e.bias[None])[0] if lin is not None else e.bias
        bias = bias_fn(bias)
        terms = [Term(t.source, t.chain + ([lin] if lin is not None else [])) for t in e.terms]
        return ("expr", Expr(terms, np.broadcast_to(bias, node.type.shape).astype(np.float64)))


def _linear(w: _Walk, node: Node):
    lin = node.with_(params={"weight": node.params["weight"]})
    b, shape = node.params.get("bias"), node.type.shape
    add_b = (lambda x: x) if b is None else (
        (lambda x: x + b) if node.op == "linear" else (lambda x: x + _channel_shape(b, shape)))
    return w.linear_step(node, lin, add_b)


def _scale(w: _Walk, node: Node):
    a, b = float(node.attrs["a"]), float(node.attrs["b"])
    return w.linear_step(node, node.with_(attrs={"a": a, "b": 0.0}), lambda x: x + b)


def _batchnorm(w: _Walk, node: Node):
    p, shape = node.params, node.type.shape
    s, c = bn_scale_shift(p["gamma"], p["beta"], p["mean"], p["var"], node.attrs["eps"])
    lin = Node(node.name, "ttfs_affine", node.inputs, TensorType(shape), params={"gain": _channel_shape(s, shape)},
               scope=node.scope)
    return w.linear_step(node, lin, lambda x: x + _channel_shape(c, shape))


def _affine(w: _Walk, node: Node):
    bias = node.params.get("bias")
    return w.linear_step(node, node.with_(params={"gain": node.params["gain"]}),
                         lambda x: x if bias is None else x + bias)


def _add(w: _Walk, node: Node):
    a, b = w.as_expr(node.inputs[0]), w.as_expr(node.inputs[1])
    return ("expr", Expr(a.terms + b.terms, a.bias + b.bias))


def _relu(w: _Walk, node: Node):
    shift = _shift_relu(w.ann, node) if node.op == "relu" else None
    if shift is not None:  # relu(x + s) - s: one R-TTFS layer whose lower clip is the shift
        pre, post, s = shift
        k = w.new_layer(post.name, "shift_relu", post.type.shape, post.scope, expr=w.as_expr(pre.inputs[0]), shift=s)
        w.sym[post.name] = ("mat", k)
        w.handled.add(post.name)
        return ("expr", Expr([Term(k, [])], np.full(node.type.shape, s)))
    s = w.sym[node.inputs[0]]
    if s[0] == "mat" and w.layers[s[1]].kind in NONNEG:
        return s  # ReLU of a non-negative layer is that layer
    return ("mat", w.new_layer(node.name, "relu", node.type.shape, node.scope, expr=w.as_expr(node.inputs[0])))


def _mat(w: _Walk, node: Node):
    if node.attrs["activation"] == "relu":
        return _relu(w, node)
    s = w.sym[node.inputs[0]]
    return s if s[0] == "mat" else ("mat", w.new_layer(node.name, "identity", node.type.shape, node.scope, expr=s[1]))


def _product(w: _Walk, node: Node):
    (ka, va), (kb, vb) = (w.operand(i) for i in node.inputs)
    act = node.attrs.get("activation")
    if act is None:
        act = "relu" if w.layers[ka].kind in NONNEG and w.layers[kb].kind in NONNEG else "identity"
    depth = w.ann.node(node.inputs[0]).type.shape[-1] if node.op == "matmul" else 1
    return ("mat", w.new_layer(node.name, f"product_{act}", node.type.shape, node.scope, operands=(ka, kb),
                               views=(va, vb), contract=node.op == "matmul", depth=depth))


def _refuse_op(node: Node):
    if node.op == "layernorm":
        _refuse(node, "LayerNorm must be decomposed before timing assignment",
                "compile with --coding ttfs (it decomposes LayerNorm first), or call "
                "spikec.codings.ttfs.layernorm.expand_layernorm")
    if node.op in NO_TTFS:
        _refuse(node, *NO_TTFS[node.op])
    if node.op in SPIKING:
        _refuse(node, f"{node.op} is a spiking neuron: TTFS timing assignment converts a trained ANN "
                "(Linear/Conv with bias, ReLU, average pooling, residual additions)",
                "give the ANN the spiking model was trained from, or compile without --coding ttfs")
    _refuse(node, f"op {node.op} has no TTFS form; supported: Linear/Conv (with bias), ReLU, shift-ReLU, "
            "identity, average pooling, flatten, BatchNorm, scalar affine, residual additions, "
            "element-wise products, LayerNorm (decomposed, approximate)",
            "replace it with a supported op (e.g. max-pool -> avg-pool, sigmoid -> ReLU)")


SYMBOLS = {"linear": _linear, "conv2d": _linear, "scale": _scale, "batchnorm": _batchnorm, "ttfs_affine": _affine,
           "add": _add, "relu": _relu, "ttfs_mat": _mat, "mul": _product, "ttfs_bmul": _product,
           "matmul": _product, **{op: (lambda w, node: w.linear_step(node, node, lambda x: x)) for op in PURE_LINEAR}}


def structure(ann: Graph) -> Plan:
    """The layers (materialised values) and, for every other ANN value, its affine expression over them."""
    walk = _Walk(ann)
    for node in ann.nodes:
        if node.name in walk.handled:
            continue
        if node.op == "input":
            walk.sym[node.name] = ("mat", walk.new_layer(node.name, "input", node.type.shape))
        elif node.op in SYMBOLS:
            walk.sym[node.name] = SYMBOLS[node.op](walk, node)
        else:
            _refuse_op(node)
    outputs = [(o, walk.materialize(o, "identity")) for o in ann.outputs]
    for layer in walk.layers:
        if layer.expr is not None and not layer.expr.terms:
            raise PassError(f"layer {layer.name!r} does not depend on the input (a constant)",
                            remedy="remove the constant branch from the model")
    return Plan(ann, walk.layers, outputs)


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


class _Timing:
    """Emits the TTFS graph layer by layer: windows, shared delay and charge nodes, synapses, thresholds."""

    def __init__(self, plan: Plan, tau: float, headroom: float):
        self.plan, self.layers, self.tau, self.headroom = plan, plan.layers, tau, headroom
        self.em = _Emitter()
        self.delayed: dict = {}   # (source layer, delay) -> spike node
        self.charges: dict = {}   # (spike node, t_min) -> charge node

    def bound(self, k) -> float:
        """The largest |value| layer ``k`` can carry, in ANN units."""
        l = self.layers[k]
        return max(-l.lo, l.hi) / l.scale

    def spikes_at(self, src, t_min):
        """(spike node, delay): layer ``src``'s spikes, delayed so that its window ends at ``t_min``."""
        s = self.layers[src]
        d = t_min - s.t_max
        if d < -1e-12 * max(1.0, abs(t_min)):
            raise PassError(f"layer {s.name!r} ends after its consumer's window starts")
        d = max(d, 0.0)
        if d == 0:
            return s.fire, d
        key = (src, d)
        if key not in self.delayed:
            self.delayed[key] = self.em.emit(f"{s.name}.ttfs.delay", "ttfs_delay", [s.fire], {"delay": d})
        return self.delayed[key], d

    def charge(self, node, t_min, name) -> str:
        key = (node, t_min)
        if key not in self.charges:
            self.charges[key] = self.em.emit(name, "ttfs_charge", [node], {"t_min": t_min})
        return self.charges[key]

    def input_layer(self, layer: Layer) -> None:
        self.em.add(self.plan.ann.node(layer.name))
        layer.scale, layer.lo, layer.hi = _window_for(layer, layer.window, self.headroom, 0.0)
        layer.t_min, layer.t_ref, layer.t_max = 0.0, layer.hi, layer.window
        layer.fire = self.em.emit(f"{layer.name}.ttfs", "ttfs_encode", [layer.name],
                                  {"t_min": 0.0, "t_ref": layer.t_ref, "t_max": layer.window, "lo": layer.lo,
                                   "hi": layer.hi, "gain": layer.scale})

    def floor(self, layer: Layer) -> float:
        """The conditioning floor of the layer's range: ``KAPPA`` times the largest input it can receive."""
        if layer.expr is None:
            return KAPPA * self.bound(layer.operands[0]) * self.bound(layer.operands[1]) * layer.depth
        absin = np.abs(layer.expr.bias)
        for t in layer.expr.terms:
            const = np.full((1, *self.layers[t.source].shape), self.bound(t.source))
            absin = absin + apply_chain([_abs_node(n) for n in t.chain], const)[0]
        return KAPPA * float(absin.max())

    def weighted_sum(self, layer: Layer, prefix: str):
        """(value node, theta) of a layer over an affine expression: one synapse group per term."""
        parts, offset = [], np.zeros(layer.shape)
        for i, t in enumerate(layer.expr.terms):
            src = self.layers[t.source]
            node, d = self.spikes_at(t.source, layer.t_min)
            layer.delays[src.name] = d
            x = self.charge(node, layer.t_min, f"{prefix}.q{i}")
            chain = _fold_gain(t.chain, layer.scale / src.scale)
            for j, n in enumerate(chain):
                x = self.em.add(n.with_(name=f"{prefix}.s{i}_{j}", inputs=(x,), scope=n.scope or layer.scope))
            parts.append(x)
            # a value-0 input has charged L_src: its share sum_j W'_ij L_src goes into the threshold
            offset = offset + apply_chain(chain, np.full((1, *src.shape), -src.lo))[0]
        v = parts[0]
        for i, p in enumerate(parts[1:], start=1):
            v = self.em.emit(f"{prefix}.sum{i}", "add", [v, p])
        return v, (offset + layer.hi - layer.scale * layer.expr.bias) / self.tau

    def product(self, layer: Layer, prefix: str):
        """(value node, theta) of a product layer: A's decoded value is the weight of B's spike."""
        ka, kb = layer.operands
        a, b = self.layers[ka], self.layers[kb]
        qs = []
        for k, view, tag in ((ka, layer.views[0], "a"), (kb, layer.views[1], "b")):
            node, d = self.spikes_at(k, layer.t_min)
            layer.delays[self.layers[k].name] = d
            q = self.charge(node, layer.t_min, f"{prefix}.q{tag}")
            for j, n in enumerate(view):   # charges are per neuron: a view of them is the operand's view
                q = self.em.add(n.with_(name=f"{prefix}.view{tag}{j}", inputs=(q,), scope=n.scope or layer.scope))
            qs.append(q)
        g = layer.scale / (a.scale * b.scale)
        v = self.em.emit(f"{prefix}.dynsyn", "ttfs_dynmatmul" if layer.contract else "ttfs_dynsyn", qs,
                         {"gain": g, "l_a": -a.lo, "l_b": -b.lo})
        return v, np.full(layer.shape, (layer.hi - g * layer.depth * a.lo * b.lo) / self.tau)

    def layer(self, layer: Layer) -> None:
        """Window, scale, synapses and threshold of a non-input layer; its ``ttfs_fire`` node."""
        sources = [t.source for t in layer.expr.terms] if layer.expr is not None else list(layer.operands)
        layer.t_min = max(self.layers[s].t_max for s in sources)
        layer.scale, layer.lo, layer.hi = _window_for(layer, layer.window, self.headroom, self.floor(layer))
        layer.t_ref, layer.t_max = layer.t_min + layer.hi, layer.t_min + layer.window
        prefix = f"{layer.name}.ttfs"
        v, theta = self.weighted_sum(layer, prefix) if layer.expr is not None else self.product(layer, prefix)
        layer.fire = self.em.emit(prefix, "ttfs_fire", [v],
                                  {"t_min": layer.t_min, "t_ref": layer.t_ref, "t_max": layer.t_max, "tau": self.tau,
                                   "scale": layer.scale, "lo": layer.lo, "hi": layer.hi, "activation": layer.kind,
                                   "source": layer.name},
                                  {"threshold": np.broadcast_to(theta, layer.shape)}, scope=layer.scope)

    def decoders(self) -> list[str]:
        """One ``ttfs_decode`` per graph output, named after it."""
        outs = []
        for name, k in self.plan.outputs:
            l = self.layers[k]
            outs.append(self.em.emit(name, "ttfs_decode", [l.fire], {"t_ref": l.t_ref, "scale": l.scale},
                                     scope=l.scope))
        return outs


def assign(plan: Plan, *, window: float = 1.0, tau: float = 1.0, headroom: float = 1.0,
           windows: dict | None = None) -> Plan:
    """Choose scales, windows, delays and thresholds; emit the TTFS graph into ``plan.graph``."""
    if not (window > 0 and tau > 0 and headroom > 0):
        raise PassError(f"window {window}, tau {tau} and headroom {headroom} must be > 0")
    windows = windows or {}
    timing = _Timing(plan, tau, headroom)
    plan.tau = tau
    for layer in plan.layers:
        layer.window = float(windows.get(layer.name, window))
        (timing.input_layer if layer.kind == "input" else timing.layer)(layer)
    outs = timing.decoders()
    meta = {"source": plan.ann.meta.get("source", ""), "coding": "ttfs", "tau_c": tau, "latency": plan.latency}
    plan.graph = verify(Graph(tuple(timing.em.nodes), tuple(outs), meta), "after TTFS timing assignment")
    return plan


def assign_ttfs_timing(ann: Graph, calibration: np.ndarray, *, window: float = 1.0, tau: float = 1.0,
                       headroom: float = 1.0, percentile: float = 100.0, windows: dict | None = None) -> Plan:
    """The pass: structure, calibration, timing and thresholds; ``plan.graph`` is the TTFS graph."""
    plan = structure(ann)
    calibrate(plan, calibration, percentile)
    return assign(plan, window=window, tau=tau, headroom=headroom, windows=windows)
