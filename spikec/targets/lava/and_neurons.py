"""The AND neurons of binary products (``products.py`` places them): the float op ``and_gate``, its integer op
``lava_and`` and the population lowering ``neurons.NEURONS["and_gate"]`` uses (``and_params``, ``and_node``,
``fixed_scale``).

An AND neuron reads two binary spikes through weight-1 synapses and fires iff both arrived: ``s = [a >= 2]`` on
the input sum ``a``, with no state. Its Lava process is Lava's standard ``LIF`` (network type ``AND``, ``AND_LIF``):
in Lava 0.10's fixed-point LIF (``PyLifModelBitAcc``) ``u_t = (u_{t-1} (4096 - du - 1) >> 12) + (a_t << 6)`` and
``v_t = (v_{t-1} (4096 - dv) >> 12) + u_t``, spiking when ``v_t > vth << 6`` (then ``v = 0``). With ``du = dv =
4095``, ``u_t = 64 a_t`` (nothing carried) and ``v_{t-1} <= 128 < 4096`` shifts to 0, so ``v_t = 64 a_t`` with
``a_t`` in {0, 1, 2}; ``vth = 1`` puts the threshold between one and two inputs: ``s_t = [a_t > 1] = [a_t >= 2]``.
Under a sub-step schedule (``period > 1``: an unrolled integer neuron elsewhere) Lava's LIF updates at every Lava
step, between the period's inputs, so the custom SpikecAND (``procs/and_gate.py``, sums its port over the period)
is used there instead.
"""
import numpy as np

from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops.registry import define, need

BOTH = 2   # an AND neuron's input sum when both operands spiked
AND_LIF = {"du": 4095, "dv": 4095, "vth": 1}   # Lava LIF parameters of an AND neuron (module doc)


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
    pop.info.update(process="LIF", lowering="two-input AND neurons: s = [a >= 2], weight-1 synapses, no state: Lava's "
                                            "LIF with du = dv = 4095, vth = 1 (SpikecAND under a sub-step schedule)")
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


