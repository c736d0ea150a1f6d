"""The AND neurons of binary products (``products.py`` places them): the float op ``and_gate``, its integer op
``lava_and`` and the population lowering ``neurons.NEURONS["and_gate"]`` uses (``and_params``, ``and_node``,
``fixed_scale``).

An AND neuron reads two binary spikes through weight-1 synapses and fires iff both arrived: ``s = [a >= 2]`` on
the input sum ``a``, with no state. Its Lava process is ``procs/and_gate.py``'s SpikecAND.
"""
import numpy as np

from spikec.compiler.ir import Graph, Node, TensorType
from spikec.ops.registry import define, need

BOTH = 2   # an AND neuron's input sum when both operands spiked


def _infer_and(node, ins):
    need(len(ins[0].shape) >= 1, node, "an AND population needs a shape")
    return TensorType(ins[0].shape, "binary")


define("and_gate", 1, _infer_and, kernel=lambda ctx, node, p, x: (x >= BOTH).to(x.dtype),
       doc="two-input AND neurons: 1 where the input (the sum of two binary spikes through weight-1 synapses) "
           "is 2, else 0; no state")


# -- the AND population in the integer reference ---------------------------------------------------------
define("lava_and", 1, _infer_and, kernel=lambda ctx, node, p, x: (x >= BOTH).to(x.dtype),
       doc="SpikecAND: s = [a >= 2] on the integer input sum a (two weight-1 binary streams); no state")


def and_params(get) -> dict:
    """The float parameters the mapping asks of an AND population: unit input gain, no bias, no leak."""
    return {"alpha": get("alpha", 1.0), "bias": get("bias"), "beta": get("beta"), "threshold": get("threshold", 2.0)}


def and_node(pop, p, x, scale, vth, mant, exp) -> Node:
    """The ``lava_and`` node of AND population ``pop`` reading its integer input sum ``x``."""
    pop.info.update(process="SpikecAND", lowering="two-input AND neurons: s = [a >= 2], weight-1 synapses, no state "
                                                  "(procs/and_gate.py)")
    return Node(pop.name, "lava_and", (x,), TensorType(pop.out_shape, "binary"), {"output": "spikes"}, {},
                scope=pop.name)


def fixed_scale(pop, graph: Graph):
    """``(scale, vth)`` of a population whose integers are exact by construction, else None: an AND population
    (weight-1 synapses, no threshold to scale) and a read-out counting AND spikes through weight-1 synapses."""
    c = pop.out_shape[0]
    if pop.kind == "and":
        pop.info["scaling"] = "none: AND neurons (weight-1 synapses, fire on a = 2)"
        return np.ones(c), np.full(c, BOTH, dtype=np.int64)
    if pop.kind == "readout" and pop.streams and all(
            s.op is not None and graph.node(s.source).op == "and_gate" and np.isin(s.op.weight, (0.0, 1.0)).all()
            and not s.op.bias.any() for s in pop.streams):
        pop.info["scaling"] = "none: a count of AND spikes through weight-1 synapses (exact integers)"
        return np.ones(c), None
    return None


