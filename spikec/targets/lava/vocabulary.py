"""What the Lava target maps from the float IR: its lowering table, keyed by op, and its refusals by op.

``LOWERINGS`` says, per float op, what it becomes on Loihi; ``mapping.py`` reads an op's role from it (a neuron
population, a synapse, a pool, a term of a population's input, a host op), and a neuron op's fixed-point form is
its entry in ``neurons.NEURONS``; a placement op (concat, slice, sum, mean) is wiring, split into the synapses reading
it (``placement.py``). ``NO_MAPPING`` holds the reasons of ops refused by name; any other op is refused
as having no Loihi mapping.
"""
from spikec.targets.lava.host import HOST
from spikec.targets.lava.neurons import NEURONS as NEURON_LOWERINGS
from spikec.targets.lava.over_time import OPS_OVER_TIME
from spikec.targets.lava.ops_table import entry, having
from spikec.targets.lava.placement import PLACEMENT as PLACEMENT_OPS
from spikec.targets.lava.refusal import SUPPORTED, refuse  # noqa: F401  (the target's refusal, re-exported)

NEURON, SYNAPSE, POOL, TERM, GRAPH_INPUT, HOST_OP = "neuron", "synapse", "pool", "term", "input", "host"
PLACEMENT, OVER_TIME = "placement", "over time"
LOWERINGS: dict[str, str] = {
    "input": GRAPH_INPUT,      # binary or integer spikes sent by the host
    "conv2d": SYNAPSE,         # Conv (kernel flipped and transposed for Lava's true convolution)
    "linear": SYNAPSE,         # Dense, or DelayDense after a delay
    "avgpool2d": POOL,         # folded into the adjacent conv2d / linear
    "maxpool2d": POOL,         # over binary spikes: an OR population; over real values: a host partition
    "flatten": TERM,           # a Dense reading a flattened population (column order permuted)
    "delay": TERM,             # DelayDense axon delays, or a Relay
    "add": TERM,               # synaptic streams summed in a population's input port
    "substep_sum": TERM,       # the count of an unrolled neuron (a synapse sums its sub-steps anyway)
    **{op: PLACEMENT for op in PLACEMENT_OPS},   # concat/slice/sum/mean: split into the synapses reading them
    **{op: NEURON for op in NEURON_LOWERINGS},   # a population of neurons.NEURONS[op].kind
    **{op: HOST_OP for op in HOST},              # a host partition (a Host process)
    **{op: OVER_TIME for op in OPS_OVER_TIME},   # an output's read-out over time of spikes: on the host, split off
}                                                # before the mapping (over_time.py)
NEURONS = tuple(op for op, role in LOWERINGS.items() if role == NEURON)
MAPPED = tuple(LOWERINGS)
PLACED_ONLY = ("is mapped only as wiring of the synapses reading it (placement.py): a linear on a per-step vector, "
               "or a conv2d (groups 1) over whole channels with the spatial positions kept; this one also feeds "
               "something else (a neuron, an output, another op) or a conv2d across spatial positions")
OVER_TIME_ONLY = ("is computed on the host only as a graph output read out of a spiking node's recorded spikes "
                  "(over_time.py); this one reads real values, or another node reads it")
NO_MAPPING = {
    "tdm": "TDM has no static fixed-point form here (run tdm_dual_kernel first)",
    "windowsum": "a window sum outside an SDNA block is not mapped",
    **{op: entry(op).refused for op in having("refused")},   # neurons refused by name (ops_table.py)
}


def role(op: str) -> str | None:
    """What ``op`` is to the mapping (``NEURON``, ``SYNAPSE``, ...), or None when the target does not map it."""
    return LOWERINGS.get(op)


def unmapped(op: str) -> str | None:
    """Why the mapping refuses ``op`` by name, or None when it maps it. A placement op is left in the graph only
    where ``placement.split`` could not turn it into wiring."""
    if role(op) == PLACEMENT:
        return f"a {op} {PLACED_ONLY}"
    if role(op) == OVER_TIME:
        return f"a read-out over time ({op}) {OVER_TIME_ONLY}"
    return NO_MAPPING.get(op, "no Loihi mapping in this target") if role(op) is None else None
