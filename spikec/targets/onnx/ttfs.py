"""ONNX emitters of the TTFS ops (registered with ``spikec.targets.onnx.emitters.register_emitter``).

Each repeats its interpreter kernel (``spikec/codings/ttfs/ops.py``) operation by operation, so the TTFS
graph's element-wise arithmetic is bit-identical in float64 onnxruntime (constants that the kernel
computes from Python floats are computed the same way here, in numpy float64). ``layernorm`` (only
when no shared emitter exists) is ReduceMean / Sub / Mul / ReduceMean / Add / Sqrt / Div / Mul / Add:
like convolutions it agrees with torch's fused kernel to a few ulp, not bit for bit.
"""
import numpy as np

from spikec.ir.graph import Node
from spikec.targets.onnx.emitters import EMITTERS, register_emitter


def _c(b, value, hint):
    return b.const(np.float64(value), hint)


def _per_step(b, node: Node, key: str):
    """A parameter broadcastable against the per-step shape, as a constant that broadcasts over [T, B, ...]."""
    return b.const(np.asarray(node.params[key]), f"{node.name}.{key}")


def encode(b, node, x):
    a = node.attrs
    v = b.op("Mul", [x, _c(b, a["gain"], f"{node.name}.gain")], hint=f"{node.name}/gain")
    v = b.op("Max", [v, _c(b, a["lo"], f"{node.name}.lo")], hint=f"{node.name}/lo")
    v = b.op("Min", [v, _c(b, a["hi"], f"{node.name}.hi")], hint=f"{node.name}/hi")
    return b.op("Sub", [_c(b, a["t_ref"], f"{node.name}.t_ref"), v], out=node.name)


def delay(b, node, t):
    return b.op("Add", [t, _c(b, node.attrs["delay"], f"{node.name}.delay")], out=node.name)


def charge(b, node, t):
    q = b.op("Sub", [_c(b, node.attrs["t_min"], f"{node.name}.t_min"), t], hint=f"{node.name}/elapsed")
    return b.op("Max", [q, _c(b, 0.0, "zero")], out=node.name)


def dynsyn(b, node, qa, qb):
    a = node.attrs
    g, la, lb = float(a["gain"]), float(a["l_a"]), float(a["l_b"])
    wa = b.op("Mul", [_c(b, g, f"{node.name}.gain"), b.op("Sub", [qa, _c(b, la, f"{node.name}.l_a")],
                                                           hint=f"{node.name}/value_a")], hint=f"{node.name}/weight")
    dyn = b.op("Mul", [wa, qb], hint=f"{node.name}/dynamic")
    stat = b.op("Mul", [_c(b, g * lb, f"{node.name}.static"), qa], hint=f"{node.name}/static")
    return b.op("Sub", [dyn, stat], out=node.name)


def dynmatmul(b, node, qa, qb):
    a = node.attrs
    g, la, lb = float(a["gain"]), float(a["l_a"]), float(a["l_b"])
    prod = b.op("MatMul", [b.op("Sub", [qa, _c(b, la, f"{node.name}.l_a")], hint=f"{node.name}/value_a"), qb],
                hint=f"{node.name}/matmul")
    dyn = b.op("Mul", [_c(b, g, f"{node.name}.gain"), prod], hint=f"{node.name}/dynamic")
    rows = b.op("ReduceSum", [qa, b.ints([-1], "last_axis")], hint=f"{node.name}/rows", keepdims=1)
    stat = b.op("Mul", [_c(b, g * lb, f"{node.name}.static"), rows], hint=f"{node.name}/static")
    return b.op("Sub", [dyn, stat], out=node.name)


def fire(b, node, v):
    a = node.attrs
    start = np.float64(a["t_min"]) + np.float64(a["tau"]) * np.asarray(node.params["threshold"])  # as the kernel
    t = b.op("Sub", [b.const(start, f"{node.name}.crossing_at_rest"), v], hint=f"{node.name}/crossing")
    t = b.op("Max", [t, _c(b, a["t_min"], f"{node.name}.t_min")], hint=f"{node.name}/from")
    return b.op("Min", [t, _c(b, a["t_max"], f"{node.name}.t_max")], out=node.name)


def decode(b, node, t):
    a = node.attrs
    y = b.op("Sub", [_c(b, a["t_ref"], f"{node.name}.t_ref"), t], hint=f"{node.name}/value")
    return b.op("Div", [y, _c(b, a["scale"], f"{node.name}.scale")], out=node.name)


def mat(b, node, x):
    return b.op("Relu" if node.attrs["activation"] == "relu" else "Identity", [x], out=node.name)


def bmul(b, node, x, y):
    if node.attrs["activation"] != "relu":
        return b.op("Mul", [x, y], out=node.name)
    return b.op("Relu", [b.op("Mul", [x, y], hint=f"{node.name}/product")], out=node.name)


def affine(b, node, x):
    if "bias" not in node.params:
        return b.op("Mul", [x, _per_step(b, node, "gain")], out=node.name)
    y = b.op("Mul", [x, _per_step(b, node, "gain")], hint=f"{node.name}/gain")
    return b.op("Add", [y, _per_step(b, node, "bias")], out=node.name)


def layernorm(b, node, x):
    axes = b.ints([-1], "last_axis")
    mean = b.op("ReduceMean", [x, axes], hint=f"{node.name}/mean", keepdims=1)
    d = b.op("Sub", [x, mean], hint=f"{node.name}/center")
    var = b.op("ReduceMean", [b.op("Mul", [d, d], hint=f"{node.name}/square"), axes], hint=f"{node.name}/var",
               keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, _c(b, node.attrs["eps"], f"{node.name}.eps")], hint=f"{node.name}/var_eps")],
               hint=f"{node.name}/std")
    y = b.op("Mul", [b.op("Div", [d, std], hint=f"{node.name}/norm"), _per_step(b, node, "gamma")],
             hint=f"{node.name}/scaled")
    return b.op("Add", [y, _per_step(b, node, "beta")], out=node.name)


for _op, _fn in [("ttfs_encode", encode), ("ttfs_delay", delay), ("ttfs_charge", charge), ("ttfs_dynsyn", dynsyn),
                 ("ttfs_dynmatmul", dynmatmul),
                 ("ttfs_fire", fire), ("ttfs_decode", decode), ("ttfs_mat", mat), ("ttfs_bmul", bmul),
                 ("ttfs_affine", affine)]:
    register_emitter(_op, _fn)
if "layernorm" not in EMITTERS:
    register_emitter("layernorm", layernorm)
