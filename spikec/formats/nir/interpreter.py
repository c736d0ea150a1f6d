"""A discrete-time NIR interpreter, written from the NIR definitions (nir 1.0.8) and independent of the exporter.

``run(path_or_graph, inputs, dt=..., scheme=...)`` reads a ``.nir`` file with ``nir.read`` (or takes a
``nir.NIRGraph``), and runs it in float64 on ``[T, B, ...]`` inputs, one step of ``dt`` at a time.

Time: every node is evaluated once per step, inputs before consumers. The inputs of a node sum.
An edge that closes a cycle (found by a depth-first walk from the Input nodes, edges in file order)
is read one step late: it carries its source's output of the previous step; at the first step, its
source's output at rest (every neuron and Delay outputs 0 there, stateless nodes compute from that: a feedback
``Affine`` carries its bias). That is the file's continuous-time meaning at ``t = 0`` and what snnTorch's
importer computes (``RSynaptic``/``RLeaky`` add ``rec(0) = bias`` at the first step); nirtorch-based importers
(Norse) read 0 there, which differs only when a back edge carries a bias. Nested ``NIRGraph`` nodes are inlined (their Input/Output nodes pass values through).
Every neuron state starts at 0.

Neurons, two discretizations of NIR's ODEs (equal in exact arithmetic; they differ only in rounding):

``scheme="norse"`` -- literal forward Euler, in Norse's order of operations::

    LIF      v <- v + dt*(1/tau)*((r*I + v_leak) - v);  z = v > v_threshold;  v <- v_reset where z
    LI       v <- v + dt*(1/tau)*((r*I + v_leak) - v)   (output v)
    IF       v <- v + (dt*r)*I;  z = v > v_threshold;  v <- v_reset where z
    I        v <- v + (dt*r)*I                          (output v)
    CubaLIF  i <- i + dt*(1/tau_syn)*(w_in*I - i);  v as LIF with i as its input
    CubaLI   i as CubaLIF;  v as LI                     (output v)

``scheme="snntorch"`` -- snnTorch's importer form: the state is kept in units of the input, i.e. divided
by the input gain ``g = r*dt/tau`` (computed as snnTorch does, ``(r*dt)/tau``; ``g = r*dt`` for IF/I),
so that ``beta = 1 - dt/tau`` and ``u <- beta*u + I + v_leak/r``, spike ``u > v_threshold/g``, reset to
``v_reset/g``. CubaLIF: ``s <- (1 - dt/tau_syn)*s + I``, ``u <- (1 - dt/tau_mem)*u + s + v_leak/(r*gs)`` with
``gs = w_in*dt/tau_syn``, spike ``u > v_threshold/(g*gs)``. State outputs (LI, I, CubaLI) are given back
in NIR units (``g*u``).

``scheme="sinabs"`` (``CONSUMER_SCHEMES``) -- a file written for Sinabs: LIF, IF and LI as ``sinabs.from_nir`` runs
them (MultiSpike counts, subtract reset, ``exp(-dt/tau)``; ``schemes_sinabs``); no other neuron.

Other nodes: Affine ``x W^T + b``; Linear ``x W^T``; Scale ``s*x``; Conv1d/Conv2d as PyTorch (a string
padding as PyTorch reads it); AvgPool2d as PyTorch's default (zero padding counted); SumPool2d the window
sum; Flatten over the batch-free dims (NIR's convention: ``start_dim=0`` is the first per-sample dim);
Delay by ``round(delay/dt)`` steps (must be a whole number); Threshold ``x > threshold``.
"""
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nir
import numpy as np
import torch
import torch.nn.functional as F

from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.formats.nir import hdf5
from spikec.formats.nir import schemes_sinabs

SCHEMES = ("snntorch", "norse")
CONSUMER_SCHEMES = ("sinabs",)   # a consumer's own reading of the neurons (schemes_sinabs), named in a file's metadata
NEURONS = ("LIF", "LI", "IF", "I", "CubaLIF", "CubaLI")
STATELESS = ("Input", "Output", "Affine", "Linear", "Scale", "Conv1d", "Conv2d", "AvgPool2d", "SumPool2d",
             "Flatten", "Threshold")
SUPPORTED = STATELESS + NEURONS + ("Delay", "NIRGraph")


@dataclass
class NIRRun:
    values: dict[str, np.ndarray] = field(default_factory=dict)  # node -> [T, B, ...]

    def output(self, name: str) -> np.ndarray:
        return self.values[name]


def read(source) -> nir.NIRGraph:
    """A NIR graph from a path (``nir.read``) or as given; a clear BadInput when the file is not NIR."""
    if isinstance(source, nir.NIRGraph):
        return source
    path = Path(source)
    if not path.is_file():
        raise BadInput(f"NIR file {str(path)!r} does not exist")
    hdf5.check_file(path)  # every array inside the file: no external link or storage is followed
    try:
        return nir.read(path)
    except Exception as e:
        raise BadInput(f"{str(path)!r} is not a readable NIR file: {type(e).__name__}: {e}",
                       remedy="write it with nir.write (nir 1.0.8), e.g. from snntorch.export_to_nir") from e


def kind(node) -> str:
    return type(node).__name__


def inline(graph: nir.NIRGraph, prefix: str = "") -> tuple[dict, list]:
    """Nodes and edges with nested graphs inlined; a subgraph's Input/Output become pass-through nodes."""
    nodes, edges = {}, []
    for name, node in graph.nodes.items():
        full = prefix + name
        if isinstance(node, nir.NIRGraph):
            sub_nodes, sub_edges = inline(node, full + ".")
            for child, v in node.nodes.items():  # the subgraph's own Input/Output nodes pass values through
                if isinstance(v, (nir.Input, nir.Output)):
                    sub_nodes[f"{full}.{child}"] = ("Pass", v)
            nodes.update(sub_nodes)
            edges += sub_edges
        else:
            nodes[full] = node
    for src, dst in graph.edges:
        src_node, dst_node = graph.nodes.get(src), graph.nodes.get(dst)
        if src_node is None or dst_node is None:
            raise BadInput(f"edge ({src!r}, {dst!r}) names a node that does not exist", where="NIR graph")
        if isinstance(src_node, nir.NIRGraph):
            outs = [k for k, v in src_node.nodes.items() if isinstance(v, nir.Output)]
            srcs = [f"{prefix}{src}.{o}" for o in outs]
        else:
            srcs = [prefix + src]
        if isinstance(dst_node, nir.NIRGraph):
            ins = [k for k, v in dst_node.nodes.items() if isinstance(v, nir.Input)]
            dsts = [f"{prefix}{dst}.{i}" for i in ins]
        else:
            dsts = [prefix + dst]
        edges += [(s, d) for s in srcs for d in dsts]
    return nodes, edges


def schedule(nodes: dict, edges: list) -> tuple[list, set]:
    """(evaluation order, back edges): DFS from the top-level Input nodes, then Kahn on the forward edges."""
    out = defaultdict(list)
    for e in edges:
        out[e[0]].append(e[1])
    roots = [n for n, v in nodes.items() if not isinstance(v, tuple) and kind(v) == "Input"]
    if not roots:
        raise BadInput("the NIR graph has no Input node", where="NIR graph")
    back, state = set(), {}
    for root in roots:
        if root in state:
            continue
        stack = [(root, iter(out[root]))]
        state[root] = "open"
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = "done"
                stack.pop()
            elif state.get(nxt) == "open":
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = "open"
                stack.append((nxt, iter(out[nxt])))
    unreached = [n for n in nodes if n not in state]
    if unreached:
        raise BadInput(f"node(s) {unreached} cannot be reached from an Input node", where="NIR graph",
                       remedy="connect every node to the graph's input")
    indeg = {n: 0 for n in nodes}
    for e in edges:
        if e not in back:
            indeg[e[1]] += 1
    order, ready = [], [n for n in nodes if indeg[n] == 0]
    while ready:
        n = ready.pop(0)
        order.append(n)
        for m in out[n]:
            if (n, m) not in back:
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
    return order, back


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


def _ints(v, n: int):
    if isinstance(v, (str, bytes)):
        return v.decode() if isinstance(v, bytes) else v
    a = np.atleast_1d(np.asarray(v)).astype(np.int64)
    return tuple(int(x) for x in (np.broadcast_to(a, (n,)) if a.size == 1 else a))


class _Node:
    """One NIR node's per-step evaluation; ``state`` lives between steps."""

    def __init__(self, name, node, dt, scheme):
        self.name, self.node, self.dt, self.scheme = name, node, dt, scheme
        self.kind = "Pass" if isinstance(node, tuple) else kind(node)
        if self.kind not in SUPPORTED + ("Pass",):
            raise UnsupportedOp(f"NIR node type {self.kind} is not supported", where=f"NIR node {name!r}")
        self.state = None
        self.p = {} if self.kind == "Pass" else {k: v for k, v in vars(node).items()
                                                 if k not in ("input_type", "output_type", "metadata")}
        self.history: list = []

    def param(self, k):
        return _t(self.p[k])

    def step(self, x):
        k = self.kind
        if k in ("Pass", "Input", "Output"):
            return x
        fn = getattr(self, k)
        if self.scheme == "sinabs" and k in NEURONS:   # Sinabs's MultiSpike step (schemes_sinabs)
            fn = lambda x: schemes_sinabs.step(self, x)  # noqa: E731
        try:
            return fn(x)
        except (RuntimeError, ValueError, IndexError) as e:
            raise BadInput(f"cannot evaluate: {type(e).__name__}: {e}", where=f"NIR node {self.name!r} ({k})") from e

    # stateless --------------------------------------------------------------------------
    def Affine(self, x):
        return F.linear(x, self.param("weight"), self.param("bias"))

    def Linear(self, x):
        return F.linear(x, self.param("weight"))

    def Scale(self, x):
        return x * self.param("scale")

    def Threshold(self, x):
        return (x > self.param("threshold")).to(x.dtype)

    def Conv2d(self, x):
        p = self.p
        return F.conv2d(x, self.param("weight"), self.param("bias"), _ints(p["stride"], 2), _ints(p["padding"], 2),
                        _ints(p["dilation"], 2), int(np.asarray(p["groups"])))

    def Conv1d(self, x):
        p = self.p
        return F.conv1d(x, self.param("weight"), self.param("bias"), _ints(p["stride"], 1), _ints(p["padding"], 1),
                        _ints(p["dilation"], 1), int(np.asarray(p["groups"])))

    def AvgPool2d(self, x):
        p = self.p
        return F.avg_pool2d(x, _ints(p["kernel_size"], 2), _ints(p["stride"], 2), _ints(p["padding"], 2))

    def SumPool2d(self, x):
        p = self.p
        return F.avg_pool2d(x, _ints(p["kernel_size"], 2), _ints(p["stride"], 2), _ints(p["padding"], 2),
                            divisor_override=1)

    def Flatten(self, x):
        nd = x.dim() - 1
        start, end = int(self.p["start_dim"]), int(self.p["end_dim"])
        return x.flatten(1 + start % nd, 1 + end % nd)

    def Delay(self, x):
        steps = np.asarray(self.p["delay"], dtype=np.float64) / self.dt
        whole = np.round(steps)
        if not np.allclose(steps, whole, rtol=1e-9, atol=1e-9) or (whole < 0).any():
            raise BadInput(f"delay {np.unique(self.p['delay'])[:4]} is not a whole number of steps of dt={self.dt}",
                           where=f"NIR node {self.name!r} (Delay)", remedy="choose dt so that delay/dt is integral")
        whole = torch.as_tensor(whole.astype(np.int64))
        self.history.append(x)
        t = len(self.history) - 1
        out = torch.zeros_like(x)
        for d in torch.unique(whole).tolist():
            if t - d >= 0:
                mask = (whole == d).expand_as(x) if whole.dim() else torch.ones_like(x, dtype=torch.bool)
                out = torch.where(mask, self.history[t - d], out)
        return out

    # neurons ----------------------------------------------------------------------------
    def LIF(self, x):
        dt, tau, r, v_leak, v_th, v_reset = (self.dt, self.param("tau"), self.param("r"), self.param("v_leak"),
                                             self.param("v_threshold"), self.param("v_reset"))
        v = torch.zeros_like(x) if self.state is None else self.state
        if self.scheme == "snntorch":
            beta, gain = 1 - dt / tau, r * dt / tau
            v = beta * v + x
            if bool((v_leak != 0).any()):
                v = v + v_leak / r
            s = v > v_th / gain
            v_new = torch.where(s, (v_reset / gain).expand_as(v), v)
        else:
            v = v + dt * (1 / tau) * ((r * x + v_leak) - v)
            s = v > v_th
            v_new = torch.where(s, v_reset.expand_as(v), v)
        self.state = v_new
        return s.to(x.dtype)

    def LI(self, x):
        dt, tau, r, v_leak = self.dt, self.param("tau"), self.param("r"), self.param("v_leak")
        v = torch.zeros_like(x) if self.state is None else self.state
        if self.scheme == "snntorch":
            gain = r * dt / tau
            v = (1 - dt / tau) * v + x
            if bool((v_leak != 0).any()):
                v = v + v_leak / r
            self.state = v
            return gain * v
        v = v + dt * (1 / tau) * ((r * x + v_leak) - v)
        self.state = v
        return v

    def IF(self, x):
        dt, r, v_th, v_reset = self.dt, self.param("r"), self.param("v_threshold"), self.param("v_reset")
        v = torch.zeros_like(x) if self.state is None else self.state
        if self.scheme == "snntorch":
            gain = r * dt
            v = v + x
            s = v > v_th / gain
            v_new = torch.where(s, (v_reset / gain).expand_as(v), v)
        else:
            v = v + (dt * r) * x
            s = v > v_th
            v_new = torch.where(s, v_reset.expand_as(v), v)
        self.state = v_new
        return s.to(x.dtype)

    def I(self, x):  # noqa: E743 -- NIR's node name
        dt, r = self.dt, self.param("r")
        v = torch.zeros_like(x) if self.state is None else self.state
        if self.scheme == "snntorch":
            self.state = v + x
            return (r * dt) * self.state
        self.state = v + (dt * r) * x
        return self.state

    def _cuba(self, x, fire: bool):
        dt, tau_syn, tau_mem, r, v_leak, w_in = (self.dt, self.param("tau_syn"), self.param("tau_mem"),
                                                 self.param("r"), self.param("v_leak"), self.param("w_in"))
        i, v = (torch.zeros_like(x), torch.zeros_like(x)) if self.state is None else self.state
        v_th = self.param("v_threshold") if fire else None
        if self.scheme == "snntorch":
            gs, gm = w_in * dt / tau_syn, r * dt / tau_mem
            i = (1 - dt / tau_syn) * i + x
            v = (1 - dt / tau_mem) * v + i
            if bool((v_leak != 0).any()):
                v = v + v_leak / (r * gs)
            if not fire:
                self.state = (i, v)
                return gm * gs * v
            s = v > v_th / (gm * gs)
            v_new = torch.where(s, (self.param("v_reset") / (gm * gs)).expand_as(v), v)
        else:
            i = i + dt * (1 / tau_syn) * (w_in * x - i)
            v = v + dt * (1 / tau_mem) * ((r * i + v_leak) - v)
            if not fire:
                self.state = (i, v)
                return v
            s = v > v_th
            v_new = torch.where(s, self.param("v_reset").expand_as(v), v)
        self.state = (i, v_new)
        return s.to(x.dtype)

    def CubaLIF(self, x):
        return self._cuba(x, True)

    def CubaLI(self, x):
        return self._cuba(x, False)


@contextlib.contextmanager
def one_thread():
    """Per-step tensors are tiny: torch's thread pool only costs time (and much more on a busy machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run(source, inputs, *, dt: float, scheme: str = "snntorch", record=None) -> NIRRun:
    with one_thread():
        return _run(source, inputs, dt=dt, scheme=scheme, record=record)


def _run(source, inputs, *, dt: float, scheme: str, record) -> NIRRun:
    """Run a NIR graph on ``inputs`` (an array ``[T, B, ...]`` for a one-input graph, or Input name -> array).

    Returns every node's output ``[T, B, ...]`` (or only the names in ``record``); Output nodes included.
    """
    if scheme not in SCHEMES + CONSUMER_SCHEMES:
        raise BadInput(f"unknown NIR scheme {scheme!r}", remedy=f"use one of {', '.join(SCHEMES + CONSUMER_SCHEMES)}")
    if not dt > 0:
        raise BadInput(f"dt must be positive, got {dt}")
    graph = read(source)
    nodes, edges = inline(graph)
    order, back = schedule(nodes, edges)
    top_inputs = [n for n, v in nodes.items() if not isinstance(v, tuple) and kind(v) == "Input"]
    if not isinstance(inputs, dict):
        if len(top_inputs) != 1:
            raise BadInput(f"the NIR graph has {len(top_inputs)} inputs {top_inputs}; pass a dict name -> array")
        inputs = {top_inputs[0]: inputs}
    data = {}
    for name in top_inputs:
        if name not in inputs:
            raise BadInput(f"no data for NIR input {name!r}")
        x = np.asarray(inputs[name], dtype=np.float64)
        shape = np.asarray(nodes[name].input_type["input"]).astype(int).tolist()
        if list(x.shape[2:]) != list(shape):
            raise BadInput(f"NIR input {name!r} expects [T, B, {', '.join(map(str, shape))}], got {tuple(x.shape)}")
        data[name] = torch.as_tensor(x)
    steps = {x.shape[0] for x in data.values()}
    if len(steps) != 1:
        raise BadInput(f"inputs disagree on T: {sorted(steps)}")
    T = steps.pop()
    evals = {n: _Node(n, nodes[n], dt, scheme) for n in order}
    into = defaultdict(list)
    for e in edges:
        into[e[1]].append(e)
    keep = set(order) if record is None else set(record)
    trace = {n: [] for n in order if n in keep}
    prev = _rest(order, nodes, into, back, data, dt, scheme) if back else {}
    for t in range(T):
        cur: dict[str, torch.Tensor] = {}
        for n in order:
            if n in data:
                x = data[n][t]
            else:
                parts = [(prev.get(s) if (s, n) in back else cur[s]) for s, _ in into[n]]
                parts = [p for p in parts if p is not None]
                if not parts:
                    if into[n]:  # only late edges, at the first step: zeros of the node's input shape
                        shape = nodes[n].input_type.get("input") if not isinstance(nodes[n], tuple) else None
                        if shape is None or any(v is None for v in np.atleast_1d(shape)):
                            raise BadInput("a recurrent node with no feed-forward input needs an input type",
                                           where=f"NIR node {n!r}")
                        batch = next(iter(data.values())).shape[1]
                        parts = [torch.zeros((batch, *np.asarray(shape).astype(int).tolist()), dtype=torch.float64)]
                    else:
                        raise BadInput("the node has no input edge", where=f"NIR node {n!r}")
                x = parts[0]
                for p in parts[1:]:
                    if p.shape != x.shape:
                        raise BadInput(f"inputs of shapes {tuple(x.shape[1:])} and {tuple(p.shape[1:])} cannot sum",
                                       where=f"NIR node {n!r}")
                    x = x + p
            cur[n] = evals[n].step(x)
            if n in trace:
                trace[n].append(cur[n])
        prev = cur
    return NIRRun({n: torch.stack(v).numpy() for n, v in trace.items()})


def _rest(order, nodes, into, back, data, dt, scheme) -> dict:
    """Every node's output at rest, before the first step (what a back edge carries at the first step): the
    inputs are 0, every neuron and Delay outputs 0, stateless nodes compute from their rest inputs (fresh
    evaluators: no state is touched). A node fed only by back edges has no rest value (None)."""
    rest: dict = {}
    for n in order:
        if n in data:
            rest[n] = torch.zeros_like(data[n][0])
            continue
        parts = [rest[s] for s, _ in into[n] if (s, n) not in back and rest.get(s) is not None]
        if not parts:
            rest[n] = None
            continue
        x = parts[0]
        for p in parts[1:]:
            x = x + p
        node = _Node(n, nodes[n], dt, scheme)
        rest[n] = torch.zeros_like(x) if node.kind in NEURONS + ("Delay",) else node.step(x)
    return rest
