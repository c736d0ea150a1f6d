"""Map a deployed graph onto Xylo's three layers: input channels -> hidden neurons (recurrent allowed) -> output
neurons, in float (quantize.py makes it integer).

The one form mapped (the keyword-spotting form Xylo is built for)::

    input [T, B, C]  ->  linear (W_in)  ->  hidden neuron H  ->  linear (W_out)  ->  output neuron O  ->  output

H: snnTorch ``Leaky`` (lif_snntorch), ``RLeaky`` (rleaky_snntorch; linear or one_to_one recurrence) or
``Synaptic``/``RSynaptic`` (synaptic_snntorch; no, linear or one_to_one recurrence). O: ``Leaky`` or ``Synaptic``
without recurrence (Xylo's output neurons take no recurrent input). Reset ``subtract`` (Xylo subtracts the
threshold), read ``spikes``. Anything else is refused by name (``UnsupportedOp``: node, op, why, remedy), as is a
network beyond the chip's limits (limits.py, with the numbers).
"""
from dataclasses import dataclass

import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node
from spikec.targets.xylo.limits import Chip

HIDDEN_OPS = ("lif_snntorch", "rleaky_snntorch", "synaptic_snntorch")
OUTPUT_OPS = ("lif_snntorch", "synaptic_snntorch")
FORM = "input -> linear -> hidden neuron (recurrent allowed) -> linear -> output neuron -> output"
# the ops the xylo target maps (spikec/targets/coverage.py reads it beside the other targets' tables)
LOWERINGS = {"linear": "the input, recurrent (RLeaky/RSynaptic linear) and output weights",
             **{op: "a hidden population" + (" or the output population" if op in OUTPUT_OPS else "")
                for op in HIDDEN_OPS},
             "xylo_lif": "a spikec.nn.xylo population, deployed as it is (exact.py)"}


@dataclass(frozen=True)
class Population:
    """One layer of neurons in float, as the source defines it; weights are [pre, post] as Xylo stores them."""
    node: str
    op: str
    weights: np.ndarray            # [N_pre, N] from the linear feeding it
    weights_rec: np.ndarray        # [N, N] (zeros without a recurrence)
    bias: np.ndarray               # [N] the linear's bias (plus the recurrence's bias)
    alpha: np.ndarray | None       # [N] synaptic decay (synaptic_snntorch), None without a synaptic state
    beta: np.ndarray               # [N]
    threshold: np.ndarray          # [N]
    reset_delay: bool

    @property
    def size(self) -> int:
        return self.weights.shape[1]


@dataclass(frozen=True)
class Mapped:
    input: str
    n_in: int
    hidden: Population
    output: Population
    linears: tuple[str, str]


def refuse(node: Node | str, why: str, remedy: str) -> UnsupportedOp:
    name, op = (node.name, node.op) if isinstance(node, Node) else (node, "")
    where = f"node {name!r}" + (f" (op {op})" if op else "")
    return UnsupportedOp(f"the xylo target cannot map this: {why}", where=where, remedy=remedy)


FORM_REMEDY = f"Xylo maps {FORM}; reshape the network to that form, or compile without --target xylo"


def _single_input(node: Node, graph: Graph, ops: tuple, role: str) -> Node:
    if len(node.inputs) != 1:
        raise refuse(node, f"the {role} takes {len(node.inputs)} inputs; Xylo's layers take one", FORM_REMEDY)
    src = graph.node(node.inputs[0])
    if src.op not in ops:
        raise refuse(src, f"the {role} is fed by op {src.op!r}; Xylo needs {' or '.join(ops)} there", FORM_REMEDY)
    users = graph.consumers(src.name)
    if len(users) != 1 or src.name in graph.outputs:
        raise refuse(src, "its value is used more than once (a branch); Xylo's layers form one chain",
                     FORM_REMEDY)
    return src


def _vec(node: Node, key: str, n: int) -> np.ndarray:
    v = np.asarray(node.params[key], np.float64)
    return np.broadcast_to(v, (n,)).copy()


def _recurrence(node: Node, n: int) -> tuple[np.ndarray, np.ndarray]:
    kind = node.attrs.get("recurrent", "none")
    if kind == "none":
        return np.zeros((n, n)), np.zeros(n)
    if kind == "one_to_one":
        return np.diag(_vec(node, "V", n)), np.zeros(n)
    if kind == "linear":
        w = np.asarray(node.params["weight"], np.float64)
        b = np.asarray(node.params["bias"], np.float64) if "bias" in node.params else np.zeros(n)
        return w.T.copy(), b
    raise refuse(node, f"a {kind!r} recurrence has no form on Xylo (its recurrent weights are a dense matrix of "
                       "the hidden neurons)", "use a linear or one_to_one recurrence")


def _population(node: Node, linear: Node, role: str) -> Population:
    attrs = node.attrs
    if attrs.get("reset", "subtract") != "subtract":
        raise refuse(node, f"reset {attrs.get('reset')!r}: Xylo's neurons only subtract the threshold",
                     "use reset_mechanism='subtract' (snnTorch's default)")
    if attrs.get("read", "spikes") != "spikes":
        raise refuse(node, f"it reads {attrs.get('read')!r}: Xylo's neurons emit spikes only",
                     "return the spikes of this layer")
    if node.type.substeps != 1 or len(node.type.shape) != 1:
        raise refuse(node, f"its value is {node.type.describe()}; Xylo's layers are 1-D, one step at a time",
                     "flatten to [T, B, N] before the layer")
    n = node.type.shape[0]
    w = np.asarray(linear.params["weight"], np.float64).T.copy()
    bias = np.asarray(linear.params["bias"], np.float64) if "bias" in linear.params else np.zeros(n)
    w_rec, b_rec = _recurrence(node, n) if node.op != "lif_snntorch" else (np.zeros((n, n)), np.zeros(n))
    if role == "output" and np.any(w_rec):
        raise refuse(node, "the output layer is recurrent: Xylo's output neurons take no recurrent input",
                     "make the last layer a non-recurrent Leaky/Synaptic, the recurrence in the hidden layer")
    alpha = _vec(node, "alpha", n) if node.op == "synaptic_snntorch" else None
    return Population(node.name, node.op, w, w_rec, bias + b_rec, alpha, _vec(node, "beta", n),
                      _vec(node, "threshold", n), bool(attrs.get("reset_delay", True)))


def _limits(m: Mapped, chip: Chip) -> None:
    checks = (("inputs", m.n_in, m.input), ("hidden_neurons", m.hidden.size, m.hidden.node),
              ("output_neurons", m.output.size, m.output.node))
    for key, used, where in checks:
        if used > chip[key]:
            raise refuse(where, f"{used} {key.replace('_', ' ')}: {chip.name} has {chip[key]} "
                                f"({chip.limits[key].source})", f"shrink the layer to at most {chip[key]}")
    expansion = (("input_expansion_neurons", int(np.any(m.hidden.weights != 0, 0).sum()), "receive input"),
                 ("output_expansion_neurons", int(np.any(m.output.weights != 0, 1).sum()), "feed the outputs"))
    for key, used, what in expansion:
        if key in chip.limits and used > chip[key]:
            raise refuse(m.hidden.node, f"{used} hidden neurons {what}: {chip.name} allows {chip[key]} "
                                        f"({chip.limits[key].source})", f"use at most {chip[key]} hidden neurons")
    for p in (m.hidden, m.output):
        if np.any(p.threshold <= 0):
            raise refuse(p.node, "a threshold <= 0: Xylo fires floor(Vmem / threshold) spikes and needs a "
                                 "positive threshold", "use a positive threshold")


def _layout_only(node: Node, graph: Graph) -> bool:
    """A flatten or reshape of the 1-D input onto its own shape (``nn.Flatten()`` first in a Sequential)."""
    if node.op not in ("flatten", "reshape") or len(node.inputs) != 1:
        return False
    src = graph.node(node.inputs[0])
    return src.op == "input" and len(src.type.shape) == 1 and tuple(node.type.shape) == tuple(src.type.shape)


def map_graph(graph: Graph, chip: Chip) -> Mapped:
    """The graph's layers on Xylo, or ``UnsupportedOp`` naming the first node that does not fit."""
    if len(graph.outputs) != 1:
        raise refuse(graph.outputs[-1] if graph.outputs else "output", f"{len(graph.outputs)} outputs; Xylo's "
                     "output layer is one population", "return one tensor of output spikes")
    out = graph.node(graph.outputs[0])
    if out.op == "rleaky_snntorch":
        raise refuse(out, "the output layer is recurrent: Xylo's output neurons take no recurrent input",
                     "make the last layer a non-recurrent Leaky/Synaptic, the recurrence in the hidden layer")
    if out.op not in OUTPUT_OPS:
        raise refuse(out, f"the output is op {out.op!r}; Xylo's outputs are neurons "
                          f"({', '.join(OUTPUT_OPS)})", FORM_REMEDY)
    l2 = _single_input(out, graph, ("linear",), "output neuron")
    hid = _single_input(l2, graph, HIDDEN_OPS, "output layer's linear")
    l1 = _single_input(hid, graph, ("linear",), "hidden neuron")
    if len(l1.inputs) == 1 and _layout_only(graph.node(l1.inputs[0]), graph):
        l1 = l1.with_(inputs=graph.node(l1.inputs[0]).inputs)   # nn.Flatten on [T, B, C]: nothing moves
    if len(l1.inputs) != 1 or graph.node(l1.inputs[0]).op != "input":
        src = graph.node(l1.inputs[0]) if l1.inputs else l1
        raise refuse(src, f"the hidden layer's linear is fed by op {src.op!r}, not the graph input: Xylo has one "
                          "hidden population between its input channels and its output neurons", FORM_REMEDY)
    inp = graph.node(l1.inputs[0])
    if len(graph.inputs) != 1 or not inp.type.is_spike or len(inp.type.shape) != 1 or inp.type.substeps != 1:
        raise refuse(inp, f"the input is {inp.type.describe()}; Xylo takes one [T, B, C] input of spike events",
                     "feed binary spikes of shape [T, B, C]")
    mapped = Mapped(inp.name, inp.type.shape[0], _population(hid, l1, "hidden"),
                    _population(out, l2, "output"), (l1.name, l2.name))
    _limits(mapped, chip)
    return mapped
