"""The ONNX graph builder the op emitters write into.

Every IR value is one ONNX tensor named exactly like its IR node and laid out ``[T_v, B, *shape]``:
``T_v = T * substeps`` (the node's runtime time axis, fixed at export), ``B`` symbolic. Emitters
add ONNX nodes through ``Builder.op`` and constants through ``Builder.const``; they never touch
protobufs directly, so a new IR op costs one small function in ``emitters.py``.
"""
from contextlib import contextmanager

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from spikec.ir.errors import BadInput
from spikec.ir.graph import Graph, Node

OPSET = 21          # ai.onnx opset: Split(num_outputs) >= 18, Pad(axes) >= 18; onnxruntime 1.32 runs 21
IR_VERSION = 10     # the ONNX IR version that goes with opset 21
DTYPES = {"float64": (np.float64, TensorProto.DOUBLE), "float32": (np.float32, TensorProto.FLOAT)}
BATCH = "B"         # the symbolic batch dimension


class Builder:
    """Collects ONNX nodes and initializers for one IR graph exported at a fixed ``steps`` = T."""

    def __init__(self, graph: Graph, steps: int, dtype: str = "float64"):
        if dtype not in DTYPES:
            raise BadInput(f"ONNX dtype {dtype!r} is not supported", remedy=f"use one of {sorted(DTYPES)}")
        self.graph, self.steps, self.dtype = graph, int(steps), dtype
        self.np_dtype, self.elem = DTYPES[dtype]
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.cache: dict = {}         # emitters' shared results (e.g. a neuron and its membrane twin)
        self._used: set[str] = {n.name for n in graph.nodes}
        self._consts: dict = {}
        self._scope = "t"

    @contextmanager
    def scope(self, prefix: str):
        """Name the tensors made inside ``prefix/<op>`` (readable graphs, e.g. ``lif1/t3/add``)."""
        outer, self._scope = self._scope, prefix
        try:
            yield
        finally:
            self._scope = outer

    # -- names, constants and nodes ------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A tensor name not used yet, derived from ``hint``."""
        name, k = hint, 1
        while name in self._used:
            name, k = f"{hint}_{k}", k + 1
        self._used.add(name)
        return name

    def const(self, value, hint: str, dtype=None) -> str:
        """An initializer holding ``value`` (model float dtype unless ``dtype``: e.g. np.int64 for shapes)."""
        arr = np.asarray(value, dtype=dtype or self.np_dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            name = self.fresh(hint)
            self.initializers.append(numpy_helper.from_array(arr, name))
            self._consts[key] = name
        return self._consts[key]

    def ints(self, values, hint: str = "ints") -> str:
        """An int64 1-D initializer (shapes, axes, starts/ends, pads)."""
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1), hint, np.int64)

    def op(self, op_type: str, inputs, *, out: str | None = None, hint: str | None = None, outputs: int = 1,
           **attrs):
        """Add one ONNX node; returns its output name (or list of names when ``outputs > 1``)."""
        hint = hint or f"{self._scope}/{op_type.lower()}"
        if outputs == 1:
            names = [out if out is not None else self.fresh(hint)]
            if out is not None:
                self._used.add(out)
        else:
            names = [self.fresh(f"{hint}_{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=self.fresh(f"{names[0]}:{op_type}"),
                                           **attrs))
        return names[0] if outputs == 1 else names

    def add(self, x: str, y: str, out: str | None = None) -> str:
        return self.op("Add", [x, y], out=out)

    def sub(self, x: str, y: str, out: str | None = None) -> str:
        return self.op("Sub", [x, y], out=out)

    def mul(self, x: str, y: str, out: str | None = None) -> str:
        return self.op("Mul", [x, y], out=out)

    # -- neuron and delay states -----------------------------------------------------------
    # The unrolled model starts every recurrence from a constant and never exposes a state; the one-step
    # streaming model (``streaming.StepBuilder``) overrides these two to make each state an input and an output.
    streaming = False

    def state(self, node: Node, var: str, initial, value=0.0, shape=None, dtype=None) -> str:
        """The value of ``node``'s state ``var`` before this step: ``initial`` (a tensor name, or a callable making
        one) in the unrolled model; a state input in the streaming model (starting at ``value``, a scalar or a
        per-channel vector, per sample of ``shape``, default the node's shape)."""
        return initial() if callable(initial) else initial

    def update_state(self, node: Node, var: str, value: str) -> None:
        """``node``'s state ``var`` after this step (a state output in the streaming model; nothing here)."""

    # -- IR layout helpers ----------------------------------------------------------------
    def time_len(self, name: str) -> int:
        """``T_v``: the runtime time axis length of IR value ``name`` (physical steps times sub-steps)."""
        return self.steps * self.graph.node(name).type.substeps

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.node(name).type.shape

    def per_channel(self, p: np.ndarray, shape: tuple[int, ...], hint: str) -> str:
        """A scalar, or a per-channel vector shaped ``(C, 1, ..)`` to broadcast against ``[.., B, *shape]``."""
        p = np.asarray(p)
        return self.const(p if p.ndim == 0 else p.reshape(-1, *([1] * (len(shape) - 1))), hint)

    def per_step(self, p: np.ndarray, shape: tuple[int, ...], hint: str) -> str:
        """A ``(T, C)`` schedule shaped ``(T, 1, C, 1, ..)`` to broadcast against ``[T, B, *shape]``."""
        p = np.asarray(p)
        return self.const(p.reshape(p.shape[0], 1, p.shape[1], *([1] * (len(shape) - 1))), hint)

    def split_steps(self, x: str, n: int, hint: str) -> list[str]:
        """``[n, B, ..]`` -> n tensors ``[1, B, ..]`` (one per step)."""
        if n == 1:
            return [x]
        return self.op("Split", [x], hint=hint, outputs=n, axis=0, num_outputs=n)

    def stack_steps(self, pieces: list[str], out: str | None = None, hint: str | None = None) -> str:
        """The inverse of ``split_steps``: concatenate ``[1, B, ..]`` pieces along time."""
        if len(pieces) == 1:
            return self.op("Identity", pieces, out=out, hint=hint)
        return self.op("Concat", pieces, out=out, hint=hint, axis=0)

    def reshape(self, x: str, shape, *, out: str | None = None, hint: str = "reshape") -> str:
        """ONNX Reshape; ``0`` copies the input dim (keep T and B), ``-1`` infers one dim."""
        return self.op("Reshape", [x, self.ints(shape, "shape")], out=out, hint=hint)

    def spike(self, cond: str, hint: str | None = None) -> str:
        """A boolean tensor as 0/1 in the model dtype."""
        return self.op("Cast", [cond], hint=hint, to=self.elem)

    def value_info(self, name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, self.elem, [self.time_len(name), BATCH, *self.shape(name)])

    def model(self, doc: str, metadata: dict) -> onnx.ModelProto:
        used = {i for n in self.nodes for i in n.input}
        inits = [i for i in self.initializers if i.name in used]   # constants an emitter made but did not use
        graph = helper.make_graph(self.nodes, "spikec", [self.value_info(n.name) for n in self.graph.inputs],
                                  [self.value_info(o) for o in self.graph.outputs], inits, doc_string=doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="spikec", producer_version="0.1.0", ir_version=IR_VERSION)
        helper.set_model_props(model, {k: str(v) for k, v in metadata.items()})
        return model


def where(node: Node) -> str:
    return f"node {node.name!r} ({node.op}{', module ' + repr(node.scope) if node.scope else ''})"
