"""The op registry: one ``OpDef`` per op, holding everything the compiler core knows about it.

An op family module (``spikec.ops.synapses``, ``neurons``, ...) defines each of its ops once with
``define``: arity, its parameter schema (``Param`` records: name, array layout, meaning, required), type
inference, the deployed-parameter count, its cost model, flags, and its float64 / exact-integer kernel. Ops of
other layers (a target's integer ops, TTFS ops, a converter's framework-exact neuron) are defined the same way
from their own modules. The registry imports no op module: ``spikec.ops`` imports each family.
``python -m spikec.ops.reference --write`` writes ``docs/ops.md`` from this registry.
"""
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from spikec.ir.errors import IRError, ShapeError
from spikec.ir.graph import Node, TensorType

UNSPECIFIED = "unspecified"
PER_CHANNEL = "() or (C,)"      # a scalar, or one value per channel (shape[0] of the per-step shape)


@dataclass(frozen=True)
class Param:
    """One parameter of an op's schema. ``layout`` names the array's dims, NIR-style: ``"(C_out, C_in/groups,
    kH, kW)"``, alternatives joined by ``" or "`` (``"() or (C,)"``); a ``*`` dim (``"(*shape)"``) stands for any
    number of dims; ``"unspecified"`` when the defining module gave none. The verifier checks the rank."""
    name: str
    layout: str = UNSPECIFIED
    doc: str = ""
    required: bool = True

    @property
    def ranks(self) -> frozenset | None:
        """The ranks ``layout`` allows, or None when it does not fix one (unspecified, or a ``*`` dim)."""
        alternatives = [a.strip() for a in self.layout.split(" or ")]
        if not all(re.fullmatch(r"\(.*\)", a) for a in alternatives) or "*" in self.layout:
            return None
        return frozenset(len([d for d in a[1:-1].split(",") if d.strip()]) for a in alternatives)


@dataclass(frozen=True)
class Cost:
    """How the cost model (``spikec.core.cost``) counts a synaptic op's operations.

    ``dense(node)``: multiply-accumulates of one step of one sample if every operand were dense.
    ``events(node, active)``: synaptic events the nonzero inputs trigger (fan-out per input spike), ``active``
    being the 0/1 float64 indicator of the input, ``[N, ...]`` (steps and samples merged).
    ``ac_on``: ``"binary"`` when the op is accumulate-only on binary spikes only (a weighted sum: an integer
    spike multiplies its weight), ``"spikes"`` on any spike operand (an all-ones kernel adds, whatever the count).
    ``ac_share``: counted in the report's ``ac_share`` (the share of convolution operations that are AC)."""
    dense: Callable[[Node], int]
    events: Callable
    ac_on: str = "binary"
    ac_share: bool = False


@dataclass(frozen=True)
class Decay:
    """How a neuron's per-step decays are read off its node (``spikec.app.vacuity`` warns when one leaves
    ``(0, 1]``). ``of(node)``: a list of ``(label, values)``, how a message names each decay the op holds
    (``"beta"``, ``"1 - 1/tau"``) and its values (a scalar or one per channel); empty when the node has none (an
    IF neuron). ``zero_ok``: a decay of exactly 0 is a documented stateless form of the op (``lif`` with
    ``beta = 0`` is the "spike after BN" neuron, and NIR's ``Threshold``), not a loss of memory."""
    of: Callable[[Node], list]
    zero_ok: bool = False


def f64(node: Node, name: str) -> np.ndarray:
    return np.asarray(node.params[name], dtype=np.float64)


def decay_params(*names: str, zero_ok: bool = False) -> Decay:
    """The decay rule of an op whose decays are its parameters ``names`` (those the node holds)."""
    return Decay(lambda n: [(name, f64(n, name)) for name in names if name in n.params], zero_ok)


def schema_of(required=(), optional=()) -> tuple[Param, ...]:
    """The schema of an op defined by parameter names only: every layout ``unspecified``."""
    return tuple(Param(n) for n in required) + tuple(Param(n, required=False) for n in optional)


@dataclass(frozen=True)
class KernelContext:
    """What a kernel may know about the run besides its node: integer mode and every node's time base."""
    integer: bool
    substeps: dict  # node name -> sub-steps per physical step of its output


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    required: tuple[str, ...]          # params that must be present (the schema's required names)
    optional: tuple[str, ...]          # params that may be present (the schema's optional names)
    infer: Callable[[Node, list[TensorType]], TensorType]
    count: Callable[[Node], int]       # deployed-parameter count (statistics are buffers, not counted)
    kernel: Callable | None = None     # fn(ctx, node, params, *inputs) -> tensor, (spikes, margins) or NeuronOut
    synaptic: bool = False             # a weighted sum of its input: AC on spikes, MAC otherwise
    stateful: bool = False             # output at t depends on earlier steps
    dense: bool = False                # real-valued computation with no spike-driven form (host)
    neuron: bool = False               # fires: has a threshold, spikes and a firing margin
    time_base: bool = False            # defines its own time base (sub-steps), exempt from the shared-base rule
    per_step: bool = False             # parameters indexed by time step (a static-weight target needs T copies)
    params: tuple[Param, ...] = ()     # the schema; derived from required/optional when not given
    cost: Cost | None = None           # how the cost model counts a synaptic op
    module: str = ""                   # the module that defined the op
    doc: str = ""                      # one line: what the op computes
    # facts that span layers, read from here by every layer that needs them (no other list of ops)
    decay: Decay | None = None         # a neuron's decays: how they are read off a node
    state: tuple[str, ...] = ()        # the variables its one-step form carries to the next step (ONNX streaming's
    #                                    state.<node>.<var>; some only under some attrs); () : no one-step form
    threshold_margin: bool = False     # binary spikes S = [U >= threshold] (or >), firing margin |U - threshold|:
    #                                    the membrane U is read back from margin and spike

    def __post_init__(self):
        if not self.params:
            object.__setattr__(self, "params", schema_of(self.required, self.optional))
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise IRError(f"op {self.name!r}: parameter names repeat in its schema: {names}",
                          where=f"op {self.name!r}", remedy="give each parameter one Param")
        req = tuple(p.name for p in self.params if p.required)
        opt = tuple(p.name for p in self.params if not p.required)
        if (self.required or self.optional) and (set(self.required), set(self.optional)) != (set(req), set(opt)):
            raise IRError(f"op {self.name!r}: required {self.required} / optional {self.optional} disagree with its "
                          f"schema (required {req}, optional {opt})", where=f"op {self.name!r}",
                          remedy="give the schema alone (define(..., params=...)), or names matching it")
        object.__setattr__(self, "required", req)
        object.__setattr__(self, "optional", opt)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


OPS: dict[str, OpDef] = {}


def define(name, arity, infer, required=(), optional=(), count=lambda n: 0, kernel=None, *, params=None,
           module=None, **flags) -> OpDef:
    """Register op ``name``. Its schema is ``params`` (``Param`` records); without one, it is derived from the
    ``required`` / ``optional`` names with layout ``unspecified`` (given both, they must agree)."""
    module = module or sys._getframe(1).f_globals.get("__name__", "")
    OPS[name] = OpDef(name, arity, tuple(required), tuple(optional), infer, count, kernel,
                      params=tuple(params or ()), module=module, **flags)
    return OPS[name]


class Facts(Mapping):
    """A live view of one card fact: op name -> the fact, over the registered ops that have it (true-valued).
    Read at lookup, so an op a later module registers is in it (``facts("decay").get(node.op)``)."""

    def __init__(self, fact: str):
        self.fact = fact

    def __getitem__(self, op: str):
        value = getattr(OPS[op], self.fact) if op in OPS else None
        if not value:
            raise KeyError(op)
        return value

    def __iter__(self):
        return iter([name for name, d in OPS.items() if getattr(d, self.fact)])

    def __len__(self) -> int:
        return sum(1 for d in OPS.values() if getattr(d, self.fact))


def facts(fact: str) -> Facts:
    """The ops holding card fact ``fact`` (an ``OpDef`` field: ``"neuron"``, ``"decay"``, ``"state"``, ...)."""
    if fact not in OpDef.__dataclass_fields__:
        raise IRError(f"no card fact {fact!r}", remedy=f"one of {', '.join(OpDef.__dataclass_fields__)}")
    return Facts(fact)


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
    spec = opdef(node.op)
    out = spec.infer(node, in_types)   # "input" gives its own type (a time_base op)
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
    if node.attrs.get("output") == "membrane":
        return 0
    return int(opdef(node.op).count(node))


def time_base_ops() -> set[str]:
    return {name for name, d in OPS.items() if d.time_base}
