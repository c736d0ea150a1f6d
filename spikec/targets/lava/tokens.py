"""Token-wise synapses on Loihi 2: a ``linear`` applied to every token of an ``(N, D)`` tensor, and the neurons on it.

A transformer's Linear runs on each of its N tokens (``nn.Linear`` on ``(T, B, N, D)``); Lava's Dense reads a vector.
Before mapping, ``lower`` rewrites the float graph so that every token tensor a population holds is a vector:

* A token-wise ``linear`` (input ``(..., D_in)``, M tokens) is one Dense over the flattened tokens, block-diagonal:
  ``kron(I_M, W)``, bias ``tile(b, M)`` (row-major: token ``m``'s channels are rows ``m D_out ... m D_out + D_out - 1``).
* A neuron on a token tensor whose input is that linear seen through views (``reshape`` / ``flatten`` /
  ``transpose``) and inference BatchNorms (Spikformer's ``bn(q.transpose(-1, -2)).transpose(-1, -2)``) is a flat
  population fed by the same Dense with its rows permuted into the neuron's element order and each BatchNorm's
  ``y = s x + c`` (``bn_scale_shift``, per channel of the tensor it normalises) folded in: row ``k`` is
  ``s_k W[i_k]``, bias ``s_k b[i_k] + c_k``, ``i_k`` the linear's output element that neuron ``k`` reads. Its
  spikes are read back in the token shape through a ``reshape`` (``<neuron>.tokens``): a view, which the synapses
  reading it see through (a next token-wise linear reads the flat population itself).
* A neuron on a token tensor fed by a host value (``attn @ v`` computed on the host) reads the host value flattened.

Only neurons whose parameters are scalars are flattened (a per-channel parameter would need its channel axis
found); anything else is left as it is and refused by the mapping, naming the node. A Dense of ``(M D_out) x
(M D_in)`` weights is refused beyond ``MAX_WEIGHTS`` entries (the block-diagonal is dense in Lava's Dense). The
rewritten float graph is proven against the given one by ``products.check``, as every Lava rewrite is.
"""
import numpy as np
import torch

from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import OPS, KernelContext
from spikec.ops.common import bn_scale_shift
from spikec.ops.registry import infer_type
from spikec.targets.lava import placement

VIEWS = tuple(op for op in placement.SEEN_THROUGH if op not in placement.PLACEMENT)   # reshape, flatten, transpose
MAX_WEIGHTS = 1 << 24   # entries of one block-diagonal Dense (128 MB in float64)


def _role(op: str):
    from spikec.targets.lava.vocabulary import role
    return role(op)


def _tokenwise(g: Graph, n: Node) -> bool:
    """A ``linear`` on a tensor of tokens, small enough as one block-diagonal Dense."""
    if n.op != "linear" or len(g.node(n.inputs[0]).type.shape) < 2:
        return False
    return int(np.prod(n.type.shape)) * int(np.prod(g.node(n.inputs[0]).type.shape)) <= MAX_WEIGHTS


def _block_diagonal(g: Graph, lin: Node) -> tuple:
    """``(W, b)`` of ``lin`` over its flattened input: ``kron(I_M, W)``, ``tile(b, M)`` for M tokens."""
    w = np.asarray(lin.params["weight"], dtype=np.float64)
    b = np.asarray(lin.params.get("bias", np.zeros(w.shape[0])), dtype=np.float64)
    m = int(np.prod(g.node(lin.inputs[0]).type.shape[:-1])) if len(g.node(lin.inputs[0]).type.shape) > 1 else 1
    return np.kron(np.eye(m), w), np.tile(b, m)


def _chain(g: Graph, n: Node):
    """``(linear, [views and batchnorms])`` between a linear and neuron ``n``, each read once, or None."""
    chain, x = [], g.node(n.inputs[0])
    outputs = set(g.outputs)
    while x.op in VIEWS + ("batchnorm",):
        if len(g.consumers(x.name)) != 1 or x.name in outputs:
            return None
        chain.insert(0, x)
        x = g.node(x.inputs[0])
    if x.op != "linear" or len(g.consumers(x.name)) != 1 or x.name in outputs:
        return None
    if len(g.node(x.inputs[0]).type.shape) > 1 and not _tokenwise(g, x):
        return None
    return (x, chain) if chain or len(x.type.shape) > 1 else None


def _fold(g: Graph, lin: Node, chain: list) -> tuple:
    """``(W, b)``: the neuron's input (flattened, row-major) as one linear map of the linear's flattened input."""
    ctx = KernelContext(False, {})
    shape = lin.type.shape
    idx = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(1, 1, *shape)
    s, c = torch.ones_like(idx), torch.zeros_like(idx)
    for x in chain:
        if x.op == "batchnorm":
            p = {k: np.asarray(v, dtype=np.float64) for k, v in x.params.items()}
            sc, sh = bn_scale_shift(p["gamma"], p["beta"], p["mean"], p["var"], x.attrs["eps"])
            at = (1, 1, -1) + (1,) * (idx.dim() - 3)   # per channel: dim 0 of the per-step tensor
            sc, sh = torch.from_numpy(sc).reshape(at), torch.from_numpy(sh).reshape(at)
            s, c = s * sc, c * sc + sh
        else:
            idx, s, c = (OPS[x.op].kernel(ctx, x, {}, t) for t in (idx, s, c))
    idx, s, c = (t.reshape(-1).numpy() for t in (idx, s, c))
    w, b = _block_diagonal(g, lin) if len(g.node(lin.inputs[0]).type.shape) > 1 else (
        np.asarray(lin.params["weight"], dtype=np.float64),
        np.asarray(lin.params.get("bias", np.zeros(lin.type.shape[0])), dtype=np.float64))
    k = idx.astype(np.int64)
    return w[k] * s[:, None], b[k] * s + c


def _flattenable(g: Graph, n: Node) -> bool:
    """A spiking neuron on a token tensor with scalar parameters, no twin reading its input, not a graph output."""
    if _role(n.op) != "neuron" or len(n.type.shape) < 2 or n.name in g.outputs:
        return False
    if any(np.asarray(v).size != 1 for v in n.params.values()):
        return False
    twins = [m for m in g.consumers(n.inputs[0]) if m.name != n.name and _role(m.op) == "neuron"]
    return not twins


class _Emitter:
    def __init__(self):
        self.nodes, self.types, self.rename, self.by_name = [], {}, {}, {}

    def emit(self, name, op, inputs, attrs=None, params=None, scope="", renamed=True) -> str:
        inputs = tuple(self.rename.get(i, i) for i in inputs) if renamed else tuple(inputs)
        proto = Node(name, op, inputs, TensorType((1,)), dict(attrs or {}), dict(params or {}), scope=scope)
        t = infer_type(proto, [self.types[i] for i in inputs])
        self.nodes.append(proto.with_(type=t))
        self.types[name], self.by_name[name] = t, self.nodes[-1]
        return name

    def keep(self, n: Node) -> None:
        n = n.with_(inputs=tuple(self.rename.get(i, i) for i in n.inputs))
        self.nodes.append(n)
        self.types[n.name], self.by_name[n.name] = n.type, n

    def flat(self, src: str, scope: str, reader: str) -> str:
        """``src`` as a vector for ``reader``: a flat population read through its ``.tokens`` view is read itself,
        anything else through a flatten of its own (a flatten folds into one synapse)."""
        src = self.rename.get(src, src)
        x = self.by_name.get(src)
        while x is not None and x.op in ("reshape", "flatten") and len(self.types[x.inputs[0]].shape) == 1:
            src = x.inputs[0]
            x = self.by_name.get(src)
        shape = self.types[src].shape
        if len(shape) == 1:
            return src
        return self.emit(f"{src}.flat.{reader}", "flatten", [src], {"start": 0, "end": len(shape) - 1}, scope=scope,
                         renamed=False)


def _plan(g: Graph) -> tuple[dict, set]:
    """``({neuron: (linear, chain) or None (host-fed)}, absorbed node names)``: the neurons to flatten."""
    from spikec.targets.lava.vocabulary import HOST_OP
    plan, absorbed = {}, set()
    for n in g.nodes:
        if not _flattenable(g, n):
            continue
        found = _chain(g, n)
        if found is not None:
            plan[n.name] = found
            absorbed.update([found[0].name, *(x.name for x in found[1])])
        elif len(n.type.shape) != 3 and _role(g.node(n.inputs[0]).op) == HOST_OP:
            plan[n.name] = None
    return plan, absorbed


def _neuron(e: _Emitter, g: Graph, n: Node, found) -> str:
    """Flat neuron ``n`` (same name) fed by its folded Dense or its flattened host value, and its ``.tokens`` view."""
    if found is None:
        x = e.emit(f"{n.name}.in", "reshape", [n.inputs[0]], {"shape": (int(np.prod(n.type.shape)),)}, scope=n.scope)
        what = "fed by its host value flattened"
    else:
        lin, chain = found
        w, b = _fold(g, lin, chain)
        x = e.emit(lin.name, "linear", [e.flat(lin.inputs[0], lin.scope, lin.name)], {}, {"weight": w, "bias": b},
                   scope=lin.scope, renamed=False)
        what = (f"fed by {lin.name!r} as one Dense over the flattened tokens (block-diagonal, rows in the neuron's "
                f"order" + (f", {', '.join(repr(c.name) for c in chain if c.op == 'batchnorm')} folded in"
                            if any(c.op == "batchnorm" for c in chain) else "") + ")")
    e.emit(n.name, n.op, [x], n.attrs, n.params, scope=n.scope)
    e.rename[n.name] = e.emit(f"{n.name}.tokens", "reshape", [n.name], {"shape": tuple(n.type.shape)}, scope=n.scope)
    return f"{n.op} {n.name!r} on {tuple(n.type.shape)} tokens as a flat population of {int(np.prod(n.type.shape))} " \
           f"neurons, {what}; its spikes read back through the view {n.name + '.tokens'!r}"


def lower(graph: Graph) -> tuple[Graph, list]:
    """``(graph with token tensors on chip as vectors, one rewrite record per neuron or linear)``; see the module
    doc. The graph is returned unchanged (and no record) when it holds no token-wise linear or neuron."""
    plan, absorbed = _plan(graph)
    e, records = _Emitter(), []
    for n in graph.nodes:
        if n.name in absorbed:
            continue
        if n.name in plan:
            records.append({"nodes": [n.name], "as": _neuron(e, graph, n, plan[n.name])})
        elif _tokenwise(graph, n) and n.name not in graph.outputs:
            w, b = _block_diagonal(graph, n)
            e.emit(n.name, "linear", [e.flat(n.inputs[0], n.scope, n.name)], {}, {"weight": w, "bias": b}, scope=n.scope,
                   renamed=False)
            e.rename[n.name] = e.emit(f"{n.name}.tokens", "reshape", [n.name], {"shape": tuple(n.type.shape)},
                                      scope=n.scope)
            records.append({"nodes": [n.name], "as": f"token-wise linear {n.name!r} as one Dense over the flattened "
                                                     f"tokens (block-diagonal kron(I, W)), read back through "
                                                     f"{n.name + '.tokens'!r}"})
        else:
            e.keep(n)
    if not records:
        return graph, []
    return Graph(tuple(e.nodes), graph.outputs, graph.meta), records
