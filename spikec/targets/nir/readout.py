"""A read-out over time (``time_sum``: ``x.sum(0)`` / ``x.mean(0)`` of ``[T, B, ...]``, the model's output) in NIR.

A NIR graph is a per-step system: no node reduces over time, and an integrator of the read-out (an ``I``) would be
read by no consumer (snnTorch, Norse and SpikingJelly have no ``I``; Sinabs's is an IAF). So the file is the graph
up to the read-out, whose NIR ``Output`` is the read-out's per-step input, and its metadata says the model's output
is that output summed (or averaged) over the run's steps (``read_over_time``), as ``model.onnx`` marks a last-step
read-out (``read_last``). Every check compares the per-step output with the deployed graph's (spikes exactly), and
the read-out computed from it as the source computes it (``reduce``: torch's ``sum(0)``, divided by T for a mean, in
float32 where the source summed float32 values) with the source's. Only a read-out that is a graph output, read by
nothing, is exported; one read further (``x.mean(0)`` then a Linear) is refused: its reader runs once, not per step.
"""
import numpy as np
import torch

from spikec.targets.nir.export import LOWERINGS, _refuse

NOTE = ("NIR graphs are per step: the model's output is this graph's output summed over time (its mean for 'mean'), "
        "over the run's T steps, dim 0 of [T, B, ...]")


def time_sum(ex, node) -> None:
    if node.name not in ex.graph.outputs or ex.users.get(node.name):
        _refuse(node, "a read-out over time (x.sum(0) / x.mean(0)) read by another node: NIR graphs are per step, "
                "and only a read-out that is the model's output is written (as the file's output, summed over time "
                "by its reader, metadata read_over_time)", "return the read-out as the model's output, or apply "
                "what follows it outside the exported model")
    (src,) = node.inputs
    ex.sources[node.name] = list(ex.sources[src])
    readouts = ex.__dict__.setdefault("readouts", {})
    readouts[node.name] = {"of": src, "reduce": "mean" if node.attrs.get("mean") else "sum",
                           "dtype": node.attrs.get("dtype") or "float64", "note": NOTE}
    ex.notes.append(f"{node.name}: read-out over time ({readouts[node.name]['reduce']}(0)) as the file's per-step "
                    "output, summed over time by its reader (metadata read_over_time)")


def reduce(values: np.ndarray, spec: dict) -> np.ndarray:
    """The read-out of a per-step output ``[T, B, ...]`` as the source computes it (``ops.temporal.time_sum``'s last
    step): ``[B, ...]``."""
    x = torch.as_tensor(np.asarray(values, dtype=np.float64))
    x = x.to(torch.float32) if spec.get("dtype") == "float32" else x
    s = torch.sum(x, 0)
    return (s / x.shape[0] if spec.get("reduce") == "mean" else s).double().numpy()


LOWERINGS["time_sum"] = time_sum
