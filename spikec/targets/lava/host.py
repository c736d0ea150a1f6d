"""Host partitions: dense float ops the chip cannot run, evaluated on a CPU beside Loihi.

One function, ``host_step``, computes one host op for one physical step; both the integer reference
(``lava_host`` in ``ops.py``) and the Lava host process (``procs/models.py``) call it, with the same
operands, so the float64 values a host sends to the chip are identical in both by construction.
It evaluates sample by sample with the reference interpreter's own float64 kernels on ``[1, 1, ...]``
tensors: no result depends on the batch size or on how samples are grouped in a Lava network.
Per-time-step ops (``OpDef.per_step``: BNTT, a bias schedule) take their parameters of step ``t``.
"""
import numpy as np
import torch

from spikec.ir.graph import Node, TensorType
from spikec.ops import OPS, KernelContext
from spikec.targets.lava.ops_table import entry, having

# ops a host partition runs: the dense ops of the IR and the per-time-step affine ones (no static synapse
# holds a different gain at every step)
HOST = ("dsmpa", "matmul", "softmax", "bntt", "step_bias", "batchnorm",
        # products with an integer or real operand, and the views and scales around them (products.py)
        "mul", "reshape", "transpose", "scale",
        *having("host"))   # neurons run whole on the host (ops_table.HostOp: SDNA Pairwise)


def params_of(node) -> dict:
    """The wrapped op's parameters of a ``lava_host`` node (stored with a ``p_`` prefix)."""
    return {k[2:]: np.asarray(v) for k, v in node.params.items() if k.startswith("p_")}


def out_shape(op: str, node, ins) -> tuple:
    fake = Node("host", op, tuple(f"i{k}" for k in range(len(ins))), TensorType((1,)), dict(node.attrs["attrs"]),
                params_of(node))
    return OPS[op].infer(fake, [TensorType(t.shape) for t in ins]).shape


_FLOAT = KernelContext(False, {})  # host partitions run the float64 kernels


class _Node:
    def __init__(self, op, attrs):
        self.op, self.attrs, self.name = op, attrs, f"host {op}"
        self.type = TensorType((1,))


def stateful(op: str) -> bool:
    """A host op with state over time (SDNA Pairwise's pair neurons, ``HostOp.stateful``): ``host_step`` is given
    its inputs' history (per-step ops like bntt take step t's parameters)."""
    host = entry(op).host
    return host is not None and host.stateful


def _ensure(op: str) -> None:
    if entry(op).host is not None and op not in OPS:   # a Lava process: the neuron host ops are framework ops
        import spikec.frontend.sdna  # noqa: F401  (defines SDNA Pairwise, the one such op)


def host_step(op: str, attrs: dict, params: dict, t: int, inputs: list) -> np.ndarray:
    """One physical step ``t`` of host op ``op``: ``inputs`` are float64 ``[B, ...]``; returns ``[B, ...]``.
    A ``stateful`` op is given every step so far instead, ``[t + 1, B, ...]``, and run from step 0 (its state is
    the history's; a recomputation, exact, and the same in the integer reference and the Lava host process).

    Runs torch single-threaded: results then cannot depend on thread scheduling, and a Lava process
    (forked from a parent whose OpenMP pool is live) never enters a parallel region, which can hang."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        return _host_step(op, attrs, params, t, inputs)
    finally:
        if before != 1:
            torch.set_num_threads(before)


def _host_step(op, attrs, params, t, inputs):
    _ensure(op)
    node = _Node(op, attrs)
    if stateful(op):
        return _stateful_step(node, op, params, inputs)
    p = {}
    for k, v in params.items():
        v = np.asarray(v, dtype=np.float64)
        p[k] = torch.from_numpy(np.array(v[t:t + 1] if OPS[op].per_step else v))
    kernel = OPS[op].kernel
    outs = []
    for b in range(inputs[0].shape[0]):
        xs = [torch.from_numpy(np.ascontiguousarray(np.asarray(x[b], dtype=np.float64)[None, None]))
              for x in inputs]
        outs.append(kernel(_FLOAT, node, p, *xs).numpy()[0, 0])
    return np.stack(outs)


def _stateful_step(node, op, params, history):
    """The last step of ``op`` run over ``history`` (``[t + 1, B, ...]`` per input), sample by sample."""
    p = {k: torch.from_numpy(np.array(np.asarray(v, dtype=np.float64))) for k, v in params.items()}
    outs = []
    for b in range(history[0].shape[1]):
        xs = [torch.from_numpy(np.ascontiguousarray(np.asarray(x[:, b:b + 1], dtype=np.float64))) for x in history]
        y = OPS[op].kernel(_FLOAT, node, p, *xs)
        y = y[0] if isinstance(y, tuple) else y   # (output, margins) of a neuron op
        outs.append(y.numpy()[-1, 0])
    return np.stack(outs)
