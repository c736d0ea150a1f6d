"""What the Lava target maps from the float IR, and the refusal that names the node it cannot map."""
from spikec.compiler.errors import UnsupportedOp
from spikec.compiler.ir import Node
from spikec.targets.lava.host import HOST

NEURONS = ("lif", "intfire", "intfire_unrolled", "silif", "csilif")
MAPPED = ("input", "conv2d", "linear", "flatten", "avgpool2d", "maxpool2d", "delay", "add", "substep_sum") \
    + NEURONS + HOST
NO_MAPPING = {
    "tdm": "TDM has no static fixed-point form here (run tdm_dual_kernel first)",
    "windowsum": "a window sum outside an SDNA block is not mapped",
    "mul": "a product of two activations has no static synapse (not mapped)",
    "scale": "a scale node is not mapped (fold it into the adjacent synapse)",
}
SUPPORTED = ("input (binary or integer spikes), lif, intfire (graded or unrolled), silif, csilif, conv2d, linear, "
             "flatten, avgpool2d folded into an adjacent conv2d/linear, maxpool2d over binary spikes, delay, "
             "add of synaptic streams, and host ops (" + ", ".join(HOST) + ")")


def refuse(node: Node, why: str) -> UnsupportedOp:
    return UnsupportedOp(f"the Lava target cannot map node {node.name!r} ({node.op}): {why}",
                         where=f"node {node.name!r}" + (f", module {node.scope!r}" if node.scope else ""),
                         remedy=f"the Lava target maps: {SUPPORTED}; use --target none (or another target) "
                                "for this model")
