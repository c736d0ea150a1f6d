"""The per-step ops the ATen capture lowers onto (concat, slice, sum, mean, div, amax, clamp, sigmoid, tanh): type inference keeps the value kind where the values
are moved (concat, slice) or counted (sum of spikes), rejects dims outside the step, and each kernel on
``[T, B, ...]`` equals torch on the same per-step dims; the ONNX export reproduces each in onnxruntime."""
import numpy as np
import pytest
import torch

from spikec.ir.errors import ShapeError
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify
from spikec.ops import KernelContext, infer_type, opdef
from spikec.targets.onnx import check_model_against, export

BIN, INT, REAL = TensorType((3, 4), "binary"), TensorType((3, 4), "integer", 2), TensorType((3, 4))


def typed(op, ins, attrs):
    return infer_type(Node("n", op, tuple(f"i{k}" for k in range(len(ins))), TensorType((1,)), attrs), list(ins))


def test_concat_keeps_the_kind_and_joins_the_axis():
    assert typed("concat", [BIN, BIN], {"axis": 1}) == TensorType((3, 8), "binary")
    assert typed("concat", [BIN, INT], {"axis": 0}) == TensorType((6, 4), "integer", 2)
    assert typed("concat", [BIN, REAL], {"axis": 0}) == TensorType((6, 4))
    with pytest.raises(ShapeError, match="differ outside"):
        typed("concat", [BIN, TensorType((2, 5), "binary")], {"axis": 0})


def test_slice_and_reductions():
    assert typed("slice", [BIN], {"dim": 1, "start": 1, "stop": 4, "step": 2}) == TensorType((3, 2), "binary")
    with pytest.raises(ShapeError, match="empty or out of range"):
        typed("slice", [BIN], {"dim": 1, "start": 2, "stop": 6, "step": 1})
    assert typed("sum", [BIN], {"dims": (1,), "keepdim": False}) == TensorType((3,), "integer", 4)
    assert typed("sum", [INT], {"dims": (0,), "keepdim": True}) == TensorType((1, 4), "integer", 6)
    assert typed("mean", [BIN], {"dims": (0, 1), "keepdim": True}) == TensorType((1, 1))
    with pytest.raises(ShapeError, match="keep a dim"):
        typed("mean", [BIN], {"dims": (0, 1), "keepdim": False})
    with pytest.raises(ShapeError, match="not distinct per-step dims"):
        typed("sum", [BIN], {"dims": (2,), "keepdim": False})
    assert typed("amax", [BIN], {"dims": (1,), "keepdim": True}) == TensorType((3, 1), "binary")
    with pytest.raises(ShapeError, match="lo=1.0 > hi=0.0"):
        typed("clamp", [REAL], {"lo": 1.0, "hi": 0.0})
    with pytest.raises(ShapeError, match="division by zero"):
        typed("div", [REAL], {"divisor": 0.0})


KERNELS = {
    "concat": ({"axis": 1}, lambda a, b: torch.cat([a, b], 3)),
    "slice": ({"dim": 0, "start": 0, "stop": 3, "step": 2}, lambda a: a[:, :, 0:3:2]),
    "sum": ({"dims": (1,), "keepdim": False}, lambda a: a.sum(3)),
    "mean": ({"dims": (1,), "keepdim": True}, lambda a: a.mean(3, keepdim=True)),
    "div": ({"divisor": 3.0}, lambda a: a / 3.0),
    "amax": ({"dims": (0,), "keepdim": False}, lambda a: a.amax(2)),
    "clamp": ({"lo": -0.5, "hi": None}, lambda a: a.clamp(min=-0.5)),
    "sigmoid": ({}, torch.sigmoid),
    "tanh": ({}, torch.tanh),
}


@pytest.mark.parametrize("op", KERNELS)
def test_kernel_is_torch_on_the_per_step_dims(op):
    attrs, ref = KERNELS[op]
    x = torch.as_tensor(np.random.default_rng(0).normal(size=(4, 2, 3, 4)))
    ins = (x, x * 2) if opdef(op).arity == 2 else (x,)
    node = Node("n", op, ("x",) * len(ins), TensorType((1,)), attrs)
    got = opdef(op).kernel(KernelContext(False, {}), node, {}, *ins)
    assert torch.equal(got, ref(*ins))


@pytest.mark.parametrize("op", KERNELS)
def test_onnx_reproduces_the_interpreter(op):
    attrs, _ = KERNELS[op]
    x_type = TensorType((3, 4))
    ins = ("x", "x") if opdef(op).arity == 2 else ("x",)
    node = Node("y", op, ins, TensorType((1,)), attrs)
    node = node.with_(type=infer_type(node, [x_type] * len(ins)))
    graph = verify(Graph((Node("x", "input", (), x_type), node), ("y",)))
    x = np.random.default_rng(1).normal(size=(4, 2, 3, 4))
    result = check_model_against(export(graph, 4), graph, x, run(graph, x))
    assert result["equivalent"], result["first_mismatches"]
