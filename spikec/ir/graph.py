"""The spiking IR: immutable typed nodes in a topologically ordered graph.

Shapes are *per step and per sample*: a node whose runtime tensor is ``[T, B, C, H, W]``
has ``shape == (C, H, W)``. So one graph runs for any ``T`` and ``B``, and per-channel
parameters always refer to ``shape[0]``.

Every edge carries a value kind: ``binary`` spikes {0,1}, ``integer`` spikes {0..ceiling},
or ``real``. The kind decides whether a synaptic op is accumulate-only (AC) or MAC.
"""
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from spikec.ir.errors import IRError

KINDS = ("binary", "integer", "real")
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    kind: str = "real"
    ceiling: int | None = None  # integer spikes only: values lie in 0..ceiling
    substeps: int = 1           # time base: the runtime time axis holds T * substeps virtual sub-steps

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.kind not in KINDS:
            raise IRError(f"unknown value kind {self.kind!r}", remedy=f"use one of {KINDS}")
        if any(d < 1 for d in self.shape):
            raise IRError(f"shape {self.shape} has a non-positive dimension")
        if (self.kind == "integer") != (self.ceiling is not None):
            raise IRError(f"kind {self.kind!r} with ceiling {self.ceiling!r}: "
                          "integer spikes need a ceiling, other kinds none")
        if self.ceiling is not None and self.ceiling < 1:
            raise IRError(f"integer ceiling must be >= 1, got {self.ceiling}")
        if self.substeps < 1:
            raise IRError(f"substeps must be >= 1, got {self.substeps}")

    @property
    def is_spike(self) -> bool:
        return self.kind != "real"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def describe(self) -> str:
        kind = f"integer<={self.ceiling}" if self.kind == "integer" else self.kind
        return f"{kind}{list(self.shape)}" + (f"@{self.substeps}substeps" if self.substeps > 1 else "")

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "kind": self.kind, "ceiling": self.ceiling, "substeps": self.substeps}

    @staticmethod
    def from_json(d: Mapping) -> "TensorType":
        return TensorType(tuple(d["shape"]), d["kind"], d.get("ceiling"), d.get("substeps", 1))


def _freeze_attr(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze_attr(x) for x in v)
    if isinstance(v, Mapping):
        return MappingProxyType({str(k): _freeze_attr(x) for k, x in v.items()})
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise IRError(f"attribute value {v!r} of type {type(v).__name__} is not JSON-representable")


def thaw(v: Any) -> Any:
    """A frozen attribute value as plain JSON data (dicts and lists)."""
    if isinstance(v, Mapping):
        return {k: thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v


def _freeze_param(name: str, a: Any) -> np.ndarray:
    arr = np.array(a, copy=True)
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind in "iub":
        arr = arr.astype(np.int64)
    else:
        raise IRError(f"parameter {name!r} has dtype {arr.dtype}; only float64 and int64 are allowed")
    arr.flags.writeable = False
    return arr.view()  # a view of a read-only base cannot be made writable again


@dataclass(frozen=True, eq=False)
class Node:
    """One op. ``params`` are read-only float64/int64 arrays; ``scope`` is the source module path."""
    name: str
    op: str
    inputs: tuple[str, ...]
    type: TensorType
    attrs: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, np.ndarray] = field(default_factory=dict)
    scope: str = ""

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "attrs", MappingProxyType({k: _freeze_attr(v) for k, v in self.attrs.items()}))
        object.__setattr__(self, "params", MappingProxyType(
            {k: _freeze_param(f"{self.name}.{k}", v) for k, v in self.params.items()}))

    def with_(self, **changes) -> "Node":
        """A copy with ``changes`` (``dataclasses.replace``; attrs/params replaced whole)."""
        return replace(self, **changes)


@dataclass(frozen=True, eq=False)
class Graph:
    """Nodes in topological order; graph inputs are nodes with ``op == "input"``."""
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "meta", MappingProxyType({k: _freeze_attr(v) for k, v in self.meta.items()}))
        index = {}
        for n in self.nodes:
            if n.name in index:
                raise IRError(f"two nodes are named {n.name!r}", remedy="node names must be unique")
            index[n.name] = n
        object.__setattr__(self, "_index", index)

    def node(self, name: str) -> Node:
        try:
            return self._index[name]
        except KeyError:
            raise IRError(f"no node named {name!r}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._index

    @property
    def inputs(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.op == "input")

    def consumers(self, name: str) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if name in n.inputs)

    def with_nodes(self, nodes, outputs=None) -> "Graph":
        return Graph(tuple(nodes), self.outputs if outputs is None else tuple(outputs), self.meta)
