"""ONNX emitter of ``time_sum`` (a read-out over time, ``x.sum(0)`` / ``x.mean(0)``): ``CumSum`` along time, the
mean divided by T read from the tensor's shape. onnxruntime's CumSum adds in step order while the interpreter's
last step is torch's ``sum(0)``: a few ulp, within the checker's bound (1e-9 of the largest magnitude). The op is
stateful with no one-step form here, so ``model.onnx`` is the unrolled form for it (``form_reason`` names it).

This module registers into ``emitters.EMITTERS``; ``emitters.py``'s importer (``spikec.targets.onnx``) imports it.
"""
import onnx

from spikec.ir.graph import Node
from spikec.targets.onnx.builder import Builder
from spikec.targets.onnx.emitters import emitter


@emitter("time_max")
def time_max(b: Builder, node: Node, x: str) -> str:
    """The running maximum: ONNX has no CumMax, so the steps are unrolled (model.onnx is unrolled for a
    stateful op with no one-step form): y_0 = x_0, y_t = Max(y_{t-1}, x_t), concatenated along time."""
    pieces = b.split_steps(x, b.time_len(node.inputs[0]), f"{node.name}/steps")
    pieces = [pieces] if isinstance(pieces, str) else list(pieces)
    running = [pieces[0]]
    for t, piece in enumerate(pieces[1:], 1):
        running.append(b.op("Max", [running[-1], piece], hint=f"{node.name}/max{t}"))
    return b.stack_steps(running, out=node.name)


@emitter("time_sum")
def time_sum(b: Builder, node: Node, x: str) -> str:
    axis = b.const(0, f"{node.name}.axis", "int64")  # CumSum's axis: a 0-d int64 tensor
    single = node.attrs.get("dtype") == "float32"  # the source's float32 arithmetic (snnTorch's spikes)
    if single:
        x = b.op("Cast", [x], hint=f"{node.name}/f32", to=onnx.TensorProto.FLOAT)
    s = b.op("CumSum", [x, axis], hint=f"{node.name}/cumsum")
    if node.attrs.get("mean"):
        steps = b.op("Gather", [b.op("Shape", [x], hint=f"{node.name}/shape"), axis], hint=f"{node.name}/T")
        to = onnx.TensorProto.FLOAT if single else b.elem
        s = b.op("Div", [s, b.op("Cast", [steps], hint=f"{node.name}/Tf", to=to)], hint=f"{node.name}/mean")
    return b.op("Cast", [s], out=node.name, to=b.elem)
