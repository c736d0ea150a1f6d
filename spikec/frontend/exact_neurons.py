"""What the converters of third-party neurons (``spikec.frontend.snntorch``, ``spikec.frontend.spikingjelly``)
share: the multi-step refusal, and the type inference and float-only check of their framework-exact ops."""
import torch

from spikec.ir.errors import IRError, ShapeError
from spikec.ir.graph import TensorType
from spikec.frontend.registry import refuse, refuse_after_read_out


def multi_step_only(ctx, module, name):
    refuse_after_read_out(ctx, module, name)
    if ctx.per_step:
        refuse(name, module, "a multi-step neuron on T and B merged ([T*B, ...], inside TimeDistributed or after "
               "flatten(0, 1)) would see T*B as time",
               "apply it to the [T, B, ...] tensor: outside TimeDistributed, or after unflatten(0, (T, B))")


def require_stepping(ctx, module, name, module_steps: str):
    """Refuse a neuron module whose own stepping (``"multistep"`` or ``"step"``) is not how the trace calls it.

    A multi-step module in a per-step trace would take B for time; a single-step module in a multi-step
    trace would take T for the batch. Inside TimeDistributed (T*B merged) no neuron is meaningful.
    """
    if ctx.stepping == "multistep" and ctx.per_step:
        multi_step_only(ctx, module, name)
    if module_steps != ctx.stepping:
        how = {"multistep": "a whole [T, B, ...] sequence per call", "step": "one time step [B, ...] per call"}
        refuse(name, module, f"this module computes {how[module_steps]}, but the model is traced as "
               f"{how[ctx.stepping]} (--stepping {ctx.stepping})",
               f"compile with --stepping {'multistep' if module_steps == 'multistep' else 'step or loop'}, "
               f"or configure the module for {ctx.stepping} stepping")


def infer_neuron(names):
    """Type inference of a neuron op whose named params are () or (C,): binary spikes of the input's shape."""
    def infer(node, ins):
        (t,) = ins
        for n in names:
            if n in node.params and node.params[n].shape not in ((), (t.shape[0],)):
                raise ShapeError(f"parameter {n} has shape {node.params[n].shape}; expected () or ({t.shape[0]},)",
                                 where=f"node {node.name!r} ({node.op})")
        return TensorType(t.shape, "binary")
    return infer


def float_only(node, x: torch.Tensor):
    """These kernels repeat a library's float arithmetic: an integer run has no exact form."""
    if not x.is_floating_point():
        raise IRError(f"op {node.op} has no exact integer kernel", where=f"node {node.name!r}",
                      remedy="run this graph in float64")
