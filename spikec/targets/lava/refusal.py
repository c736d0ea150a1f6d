"""The Lava target's refusal: an UnsupportedOp naming the node it cannot map, and what the target maps."""
from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Node
from spikec.targets.lava.host import HOST

SUPPORTED = ("input (binary or integer spikes, or real values sent as 8-bit graded spikes), lif, intfire (graded or unrolled), silif, csilif, lif_snntorch, "
             "synaptic_snntorch and rleaky_snntorch (recurrences one_to_one, linear, conv2d), lif_sj, lif_norse, lif_recurrent_norse (its input weights a Dense, its recurrent weights a Dense loop), li_norse (a read-out), conv2d, linear, "
             "flatten, concat / slice / sum / mean read by a linear or (whole channels) a conv2d (one synapse per source), avgpool2d folded into an adjacent conv2d/linear, maxpool2d (over binary spikes: an OR layer; over a synaptic sum into a neuron: a max tree; else a host partition), delay, "
             "add of synaptic streams, state reads (lif membrane, snnTorch mem, Norse v) as outputs, a spiking output's read-out over time (x_seq.mean(0) / .sum(0) / .max(0): on the host, from its recorded spikes), products of two binary spike tensors (mul, matmul: "
             "AND neurons), SDNA window sums (all-equal Conv windows), and host ops (" + ", ".join(HOST) + ")")


def refuse(node: Node, why: str) -> UnsupportedOp:
    return UnsupportedOp(f"the Lava target cannot map node {node.name!r} ({node.op}): {why}",
                         where=f"node {node.name!r}" + (f", module {node.scope!r}" if node.scope else ""),
                         remedy=f"the Lava target maps: {SUPPORTED}; use --target none (or another target) "
                                "for this model")
