"""Reference interpreter: runs the IR over ``[T, B, ...]`` tensors in float64, or exactly in int64.

Stateless ops run on all steps at once (T and B merged); neurons loop over ``t`` only.
Each kernel repeats the arithmetic of its ``spikec.nn`` module / torch op in the same order,
so a float64 run of the source model and of its IR agree bit for bit.

Integer mode (all params int64 and integral inputs) is exact: synaptic sums are computed in
float64 only after proving ``sum |w| * max|x| < 2**53``; ops with no exact integer form raise.
"""
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from spikec.compiler.errors import BadInput, IRError
from spikec.compiler.ir import Graph, Node
from spikec.nn.attention import ds_mpa

EXACT_FLOAT = 2 ** 53
KERNELS: dict = {}  # op -> fn(node, params, *inputs), for ops defined outside this module


def register_kernel(op: str, fn) -> None:
    """Give an op defined elsewhere (``ops.define``) its float64 kernel; neurons return (spikes, margins)."""
    KERNELS[op] = fn


@dataclass
class Trace:
    """Every recorded node output ``[T, B, ...]``, and for neurons the firing margin ``|U - boundary|``."""
    values: dict[str, np.ndarray] = field(default_factory=dict)
    margins: dict[str, np.ndarray] = field(default_factory=dict)

    def outputs(self, graph: Graph) -> list[np.ndarray]:
        return [self.values[o] for o in graph.outputs]


def _channel(p: torch.Tensor, ndim: int) -> torch.Tensor:
    """A scalar or per-channel vector broadcast against ``[B, C, ...]`` (one step)."""
    return p if p.dim() == 0 else p.view(1, -1, *([1] * (ndim - 2)))


def _per_step(fn, x: torch.Tensor) -> torch.Tensor:
    y = fn(x.flatten(0, 1))
    return y.reshape(x.shape[0], x.shape[1], *y.shape[1:])


class _NeuronOut:
    """Spikes, membrane and margin of a neuron run, filled step by step."""

    def __init__(self, x: torch.Tensor):
        self.spikes, self.membrane, self.margin = (torch.empty_like(x) for _ in range(3))

    def put(self, t, s, u, margin):
        self.spikes[t], self.membrane[t], self.margin[t] = s, u, margin

    def output(self, node) -> torch.Tensor:
        return self.membrane if node.attrs.get("output") == "membrane" else self.spikes


def _dynamics_key(node: Node) -> tuple:
    """Nodes with equal keys run identical dynamics (a neuron and its membrane read-out)."""
    attrs = tuple(sorted((k, v) for k, v in node.attrs.items() if k != "output"))
    params = tuple(sorted((k, v.tobytes()) for k, v in node.params.items()))
    return node.op, node.inputs, attrs, params


class _Kernels:
    """``op -> fn(node, params, *inputs) -> output`` (neurons return ``(spikes, margins)``)."""

    def __init__(self, integer: bool, substeps: dict):
        self.integer = integer
        self.substeps = substeps  # node name -> sub-steps per physical step of its output

    # synaptic ---------------------------------------------------------------------------
    def _exact(self, node, fn, x, w, b):
        if not self.integer:
            return fn(x, w, b)
        bound = float(w.abs().flatten(1).sum(1).max()) * float(x.abs().max() if x.numel() else 0)
        bound += float(b.abs().max()) if b is not None else 0.0
        if bound >= EXACT_FLOAT:
            raise IRError(f"integer sums may reach {bound:.3g} >= 2**53 and lose exactness",
                          where=f"node {node.name!r}", remedy="quantize to fewer bits")
        return torch.round(fn(x.double(), w.double(), None if b is None else b.double())).long()

    def conv2d(self, node, p, x):
        a = node.attrs
        conv = lambda x, w, b: _per_step(lambda z: F.conv2d(z, w, b, a["stride"], a["padding"], a["dilation"],
                                                              a["groups"]), x)
        return self._exact(node, conv, x, p["weight"], p.get("bias"))

    def linear(self, node, p, x):
        return self._exact(node, F.linear, x, p["weight"], p.get("bias"))

    def windowsum(self, node, p, x):
        k, d = node.attrs["kernel"], node.attrs["dilation"]
        w = torch.ones(x.shape[2], 1, k, k, dtype=x.dtype)
        return _per_step(lambda z: F.conv2d(z, w, padding=d * (k - 1) // 2, dilation=d, groups=x.shape[2]), x)

    # normalization, affine, pooling, structure ------------------------------------------
    def batchnorm(self, node, p, x):
        self._float_only(node)
        return _per_step(lambda z: F.batch_norm(z, p["mean"], p["var"], p["gamma"], p["beta"], False, 0.0,
                                                node.attrs["eps"]), x)

    def bntt(self, node, p, x):
        self._float_only(node)
        if x.shape[0] != p["gamma"].shape[0]:
            raise BadInput(f"BNTT holds statistics for T={p['gamma'].shape[0]} steps, the input has T={x.shape[0]}",
                           where=f"node {node.name!r}", remedy=f"run with --steps {p['gamma'].shape[0]}")
        scale = p["gamma"] / torch.sqrt(p["var"] + node.attrs["eps"])
        shift = p["beta"] - p["mean"] * scale
        return torch.stack([x[t] * _channel(scale[t], x.dim() - 1) + _channel(shift[t], x.dim() - 1)
                            for t in range(x.shape[0])])

    def tdm(self, node, p, x):
        self._float_only(node)
        lam = _channel(p["lam"], x.dim() - 1)
        prev = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
        return (1 + lam) * x - lam * prev

    def scale(self, node, p, x):
        a, b = node.attrs["a"], node.attrs["b"]
        if self.integer and (a != int(a) or b != int(b)):
            self._float_only(node)
        return x * a + b if not self.integer else x * int(a) + int(b)

    def avgpool2d(self, node, p, x):
        self._float_only(node)
        a = node.attrs
        return _per_step(lambda z: F.avg_pool2d(z, a["kernel"], a["stride"], a["padding"], a.get("ceil_mode", False),
                                                a.get("count_include_pad", True)), x)

    def maxpool2d(self, node, p, x):
        a = node.attrs
        pool = lambda z: F.max_pool2d(z, a["kernel"], a["stride"], a["padding"], a.get("dilation", (1, 1)),
                                      a.get("ceil_mode", False))
        return _per_step(pool, x.double()).to(x.dtype) if self.integer else _per_step(pool, x)

    def flatten(self, node, p, x):
        end = node.attrs["end"]
        return x.flatten(2 + node.attrs["start"], end if end < 0 else 2 + end)

    def relu(self, node, p, x):
        return F.relu(x)

    def add(self, node, p, a, b):
        return a + b

    def mul(self, node, p, a, b):
        return a * b

    def dsmpa(self, node, p, u, s, x):
        self._float_only(node)
        return ds_mpa(u, s, x, p["wq"], p["wk"], p["wv"], p["gamma"], node.attrs["eps"])

    def step_bias(self, node, p, x):
        if x.shape[0] != p["bias"].shape[0]:
            raise BadInput(f"the bias schedule holds T={p['bias'].shape[0]} steps, the input has T={x.shape[0]}",
                           where=f"node {node.name!r}", remedy=f"run with --steps {p['bias'].shape[0]}")
        return torch.stack([x[t] + _channel(p["bias"][t], x.dim() - 1) for t in range(x.shape[0])])

    def reshape(self, node, p, x):
        return x.reshape(x.shape[0], x.shape[1], *node.attrs["shape"])

    def transpose(self, node, p, x):
        return x.permute(0, 1, *(2 + d for d in node.attrs["perm"]))

    def matmul(self, node, p, a, b):
        return a @ b

    def softmax(self, node, p, x):
        self._float_only(node)
        return torch.softmax(x, dim=2 + node.attrs["dim"])

    def causal_mask(self, node, p, x):
        return torch.tril(x)

    def delay(self, node, p, x):
        k = min(node.attrs["steps"] * node.type.substeps, x.shape[0])
        return torch.cat([torch.zeros_like(x[:k]), x[: x.shape[0] - k]])

    # neurons ----------------------------------------------------------------------------
    # Neurons write spikes, membrane U (pre-reset) and the firing margin into preallocated [T, B, ...]
    # tensors; ``run`` picks the output the node asks for (its membrane twin reuses the same run).
    def lif(self, node, p, x):
        self._float_only(node)
        beta, alpha, bias, theta, v_reset = (_channel(p[k], x.dim() - 1) for k in
                                             ("beta", "alpha", "bias", "threshold", "v_reset"))
        out = _NeuronOut(x)
        h = torch.zeros_like(x[0])
        for t in range(x.shape[0]):
            u = beta * h + alpha * x[t] + bias
            s = (u - theta >= 0).to(x.dtype)
            h = u - theta * s if node.attrs["reset"] == "subtract" else u * (1 - s) + v_reset * s
            out.put(t, s, u, (u - theta).abs())
        return out

    def intfire(self, node, p, x):
        self._float_only(node)
        beta, alpha, theta = (_channel(p[k], x.dim() - 1) for k in ("beta", "alpha", "threshold"))
        offset = 0.5 if node.attrs["rounding"] == "round" else 0.0
        bias = _channel(p["bias"], x.dim() - 1) if "bias" in p else None
        out = _NeuronOut(x)
        h = torch.zeros_like(x[0])
        for t in range(x.shape[0]):
            u = beta * h + alpha * x[t] if bias is None else beta * h + alpha * x[t] + bias
            z = u / theta
            q = torch.clamp(torch.floor(z + offset), 0, node.attrs["max_spikes"])
            h = u - theta * q
            frac = z + offset - torch.floor(z + offset)
            out.put(t, q, u, torch.minimum(frac, 1 - frac) * theta)
        return out

    def silif(self, node, p, x):
        self._float_only(node)
        a, b, v_th = (_channel(p[k], x.dim() - 1) for k in ("decay", "b", "v_th"))
        kappa = node.attrs["kappa"]
        out = _NeuronOut(x)
        u, s = torch.zeros_like(x[0]), torch.zeros_like(x[0])
        for t in range(x.shape[0]):
            u = a * (u - kappa * s) + b * x[t]
            s = (u - v_th >= 0).to(x.dtype)
            out.put(t, s, u, (u - v_th).abs())
        return out

    def csilif(self, node, p, x):
        self._float_only(node)
        a_re, a_im, b, v_th = (_channel(p[k], x.dim() - 1) for k in ("a_re", "a_im", "b", "v_th"))
        kappa = node.attrs["kappa"]
        out = _NeuronOut(x)
        m_re, m_im, s = torch.zeros_like(x[0]), torch.zeros_like(x[0]), torch.zeros_like(x[0])
        for t in range(x.shape[0]):
            z_re = m_re - kappa * s
            m_re, m_im = a_re * z_re - a_im * m_im + b * x[t], a_re * m_im + a_im * z_re
            u = 2 * m_re
            s = (u - v_th >= 0).to(x.dtype)
            out.put(t, s, u, (u - v_th).abs())
        return out

    def intfire_unrolled(self, node, p, x):
        """The integer neuron's physical-step update, its count replayed as D binary sub-step spikes.

        The count ``q`` and residual are computed exactly as ``intfire`` computes them, and the sub-step
        spikes are the thermometer code ``s_d = [d < q]``: what the sub-step neuron of passes.md emits
        (``v = U + theta/2``; ``s_d = [v >= theta]``; ``v -= theta s_d``) in exact arithmetic. In float64
        that neuron's repeated subtraction can round a decimal tie differently from ``floor(U/theta + 1/2)``;
        the fixed-point targets run it in integers, where both agree.
        """
        self._float_only(node)
        beta, alpha, theta = (_channel(p[k], x.dim() - 1) for k in ("beta", "alpha", "threshold"))
        d_max = node.attrs["max_spikes"]
        offset = 0.5 if node.attrs["rounding"] == "round" else 0.0
        spikes = torch.empty((x.shape[0] * d_max, *x.shape[1:]), dtype=x.dtype)
        margin = torch.empty_like(spikes)
        bias = _channel(p["bias"], x.dim() - 1) if "bias" in p else None
        h = torch.zeros_like(x[0])
        for t in range(x.shape[0]):
            u = beta * h + alpha * x[t] if bias is None else beta * h + alpha * x[t] + bias
            z = u / theta
            q = torch.clamp(torch.floor(z + offset), 0, d_max)
            h = u - theta * q
            frac = z + offset - torch.floor(z + offset)
            for d in range(d_max):
                spikes[t * d_max + d] = (q > d).to(x.dtype)
                margin[t * d_max + d] = torch.minimum(frac, 1 - frac) * theta
        return spikes, margin

    def substep_sum(self, node, p, x):
        d = self.substeps[node.inputs[0]]
        y = x.reshape(x.shape[0] // d, d, *x.shape[1:]).sum(1)
        return y + _channel(p["bias"], y.dim() - 1) if "bias" in p else y

    def _float_only(self, node):
        if self.integer:
            raise IRError(f"op {node.op} has no exact integer kernel", where=f"node {node.name!r}",
                          remedy="run this graph in float64, or quantize it for an integer target first")


def is_integer_graph(graph: Graph) -> bool:
    params = [v for n in graph.nodes for v in n.params.values()]
    return bool(params) and all(v.dtype.kind == "i" for v in params)


def _as_inputs(graph: Graph, inputs) -> dict[str, np.ndarray]:
    names = [n.name for n in graph.inputs]
    if not isinstance(inputs, dict):
        if len(names) != 1:
            raise BadInput(f"the graph has {len(names)} inputs {names}; pass a dict name -> array")
        inputs = {names[0]: inputs}
    for n in graph.inputs:
        x = np.asarray(inputs.get(n.name)) if n.name in inputs else None
        if x is None or x.ndim != 2 + len(n.type.shape) or tuple(x.shape[2:]) != n.type.shape:
            got = "nothing" if x is None else f"shape {tuple(x.shape)}"
            raise BadInput(f"input {n.name!r} expects [T, B, {', '.join(map(str, n.type.shape))}], got {got}",
                           remedy="give inputs laid out [T, B, ...] with the per-step shape the model was traced with")
        if x.shape[0] < 1 or x.shape[1] < 1:
            raise BadInput(f"input {n.name!r} has T={x.shape[0]}, B={x.shape[1]}; both must be >= 1")
    return inputs


def run(graph: Graph, inputs, *, record: str = "all", integer: bool | None = None,
        progress: str | None = None) -> Trace:
    """Run ``graph`` on ``inputs`` (an array for a one-input graph, or name -> array).

    ``record="all"`` keeps every node's output; ``"outputs"`` only the graph outputs (less memory).
    """
    integer = is_integer_graph(graph) if integer is None else integer
    dtype = torch.int64 if integer else torch.float64
    kernels = _Kernels(integer, {n.name: n.type.substeps for n in graph.nodes})
    trace, shared = Trace(), {}
    env: dict[str, torch.Tensor] = {}
    remaining = {n.name: 0 for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            remaining[i] += 1
    keep = set(graph.outputs)
    inputs = _as_inputs(graph, inputs)
    nodes = tqdm(graph.nodes, desc=progress, delay=1.0, leave=False, disable=progress is None)
    for node in nodes:
        if node.op == "input":
            x = np.asarray(inputs[node.name])
            if integer and not np.array_equal(x, np.round(x)):
                raise BadInput(f"input {node.name!r} is not integral; an integer graph needs integer inputs")
            out = torch.as_tensor(np.array(x, dtype=np.int64 if integer else np.float64))
        else:
            params = {k: torch.as_tensor(np.array(v)) for k, v in node.params.items()}
            key = _dynamics_key(node) if "output" in node.attrs or node.name + ".membrane" in remaining else None
            kernel = KERNELS.get(node.op) or getattr(kernels, node.op)
            out = shared.get(key) or kernel(node, params, *(env[i] for i in node.inputs))
            if key is not None:
                shared[key] = out
            if isinstance(out, _NeuronOut):
                out, margin = out.output(node), out.margin
            elif isinstance(out, tuple):
                out, margin = out
            else:
                margin = None
            if margin is not None and (record == "all" or node.name in keep):
                trace.margins[node.name] = margin.numpy()
        env[node.name] = out
        if record == "all" or node.name in keep:
            trace.values[node.name] = out.numpy()
        for i in node.inputs:  # free what no later node reads
            remaining[i] -= 1
            if remaining[i] == 0 and i not in keep:
                env.pop(i, None)
    return trace
