"""The op registry: one ``OpDef`` per op, holding everything the compiler core knows about it.

An op family module (``spikec.ops.synapses``, ``neurons``, ...) defines each of its ops once with
``define``: arity, required and optional parameters (array layouts in the module's docstring), type
inference, the deployed-parameter count, flags, and its float64 / exact-integer kernel. Ops of other
layers (a target's integer ops, TTFS ops, a converter's framework-exact neuron) are defined the same way
from their own modules. The registry imports no op module: ``spikec.ops`` imports each family.
"""
from dataclasses import dataclass, replace
from typing import Callable

from spikec.compiler.errors import IRError, ShapeError
from spikec.compiler.ir import Node, TensorType


@dataclass(frozen=True)
class KernelContext:
    """What a kernel may know about the run besides its node: integer mode and every node's time base."""
    integer: bool
    substeps: dict  # node name -> sub-steps per physical step of its output


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    required: tuple[str, ...]          # params that must be present
    optional: tuple[str, ...]          # params that may be present
    infer: Callable[[Node, list[TensorType]], TensorType]
    count: Callable[[Node], int]       # deployed-parameter count (statistics are buffers, not counted)
    kernel: Callable | None = None     # fn(ctx, node, params, *inputs) -> tensor, (spikes, margins) or NeuronOut
    synaptic: bool = False             # a weighted sum of its input: AC on spikes, MAC otherwise
    stateful: bool = False             # output at t depends on earlier steps
    dense: bool = False                # real-valued computation with no spike-driven form (host)
    neuron: bool = False               # fires: has a threshold, spikes and a firing margin
    time_base: bool = False            # defines its own time base (sub-steps), exempt from the shared-base rule


OPS: dict[str, OpDef] = {}


def define(name, arity, infer, required=(), optional=(), count=lambda n: 0, kernel=None, **flags) -> OpDef:
    OPS[name] = OpDef(name, arity, tuple(required), tuple(optional), infer, count, kernel, **flags)
    return OPS[name]


def register_kernel(op: str, fn) -> None:
    """Give an op defined without one its float64 kernel ``fn(node, params, *inputs)`` (no run context)."""
    OPS[op] = replace(opdef(op), kernel=lambda ctx, node, p, *xs: fn(node, p, *xs))


def opdef(op: str) -> OpDef:
    if op not in OPS:
        raise IRError(f"unknown op {op!r}", remedy=f"known ops: {', '.join(sorted(OPS))}")
    return OPS[op]


def need(cond: bool, node: Node, what: str) -> None:
    """Type inference's one check: a ShapeError naming the node (and its module) when ``cond`` fails."""
    if not cond:
        scope = f", module {node.scope!r}" if node.scope else ""
        raise ShapeError(what, where=f"node {node.name!r} ({node.op}{scope})")


def infer_type(node: Node, in_types: list[TensorType]) -> TensorType:
    """The output type ``node`` must have given its input types (raises ShapeError).

    A stateless op keeps the sub-step time base of its inputs; a stateful one runs on physical steps
    only; ops flagged ``time_base`` define their own.
    """
    if node.op == "input":
        return node.type
    spec = opdef(node.op)
    out = spec.infer(node, in_types)
    if spec.time_base:
        return out
    bases = {t.substeps for t in in_types}
    need(len(bases) <= 1, node, f"inputs run on different time bases (substeps {sorted(bases)})")
    base = bases.pop() if bases else 1
    need(base == 1 or not spec.stateful, node,
         f"a stateful {node.op} runs on physical steps; its input runs on {base} virtual sub-steps per step")
    return replace(out, substeps=base)


def deployed_params(node: Node) -> int:
    # a neuron's membrane read-out shares the parameters of its spike node: count them once
    if node.op == "input" or node.attrs.get("output") == "membrane":
        return 0
    return int(opdef(node.op).count(node))


def time_base_ops() -> set[str]:
    return {name for name, d in OPS.items() if d.time_base}
