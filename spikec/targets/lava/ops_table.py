"""The Lava target's table keyed by op: every fact the target keeps about a float op of its own, in one place.

This module is the only one of ``spikec/targets/lava/`` that names a neuron op (tests/test_op_mentions.py holds
it). Every other module reads the table (``entry(op)``, or a view below), the op cards' facts
(``spikec.ops``: ``neuron``, ``decay``, ``state``, the parameter schema) or a name constant of the card's module
(``spikec.ops.neurons.LIF``). A new neuron op is one ``LavaOp`` here (its ``form``: the fixed-point lowering, a
key of ``neurons.FORMS``), plus, for new fixed-point dynamics, its integer op, population and process.

It sits at the bottom of the target's imports (nothing of the target imported): the host, the mapping, the
rewrites and the report all read it without a cycle.
"""
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

# the population kinds (mapping.Population.kind): the neuron model a population of Lava processes runs
KIND_LIF, KIND_INTFIRE, KIND_SILIF, KIND_CSILIF, KIND_AND = "lif", "intfire", "silif", "csilif", "and"


@dataclass(frozen=True)
class HostOp:
    """A neuron op the target runs whole on a host partition (``host.HOST``)."""
    why: str                                   # the products report's reason (products._host_record)
    macs: Callable[[tuple, list, dict], int]   # multiply-accumulates per step: (out shape, in shapes, attrs)
    stateful: bool = False                     # host.host_step gives it its inputs' history


@dataclass(frozen=True)
class LavaOp:
    """What the Lava target does with one float op."""
    form: str = ""                             # its neuron lowering: a key of neurons.FORMS ("": none)
    reads: Mapping[str, str] = field(default_factory=dict)   # a state ``read`` recorded as a graph output ->
    #                                            the integer output it is (mapping.state_read)
    zero_reset_spikes_as: str = ""             # the op the frontend emits for this op's spikes under a zero
    #                                            reset (a state read's owner: mapping.state_read)
    zero_reset_variant: bool = False           # chip_variant.zero_reset may make its subtract reset a zero reset
    zero_reset_attrs: Mapping[str, object] = field(default_factory=dict)   # ... and set these attributes too
    #                                            (a zero reset one step late is not Lava's LIF either)
    memoryless_zero_reset: bool = False        # beta = 0 makes its subtract reset a zero reset, exactly
    #                                            (chip_variant.memoryless_resets)
    dense_input_weights: bool = False          # its input_weights become a Dense of their own
    #                                            (placement.split_norse_input)
    integrates_alone: bool = False             # with no reset, a read of its state without its spikes is a leaky
    #                                            integrator of its own (mapping.state_read: it never fires)
    counts_as_intfire: bool = False            # a MaxSpike(n) form is intfire exactly (sinabs_counts.lower)
    host: HostOp | None = None                 # run on a host partition (host.py)
    refused: str = ""                          # why the mapping refuses it by name (vocabulary.NO_MAPPING)
    exact_source: str = ""                     # what the exact-source deployment lowers it to (exact_source.py)
    exact_source_neuron: bool = False          # ... as a neuron population


_PAIRWISE_WHY = ("SDNA Pairwise: its pair neurons read Q_i K_j and weight V_j by their integer spikes, products of "
                 "integer spikes (not coincidences); the whole op runs on the host, its inputs read from the chip "
                 "as counts")
_ALPHA = ("snnTorch's Alpha neuron sums two currents with different decays into its membrane (mem = tau (syn_exc + "
          "syn_inh), no membrane leak) and resets each differently at a spike (syn_exc -= theta, syn_inh zeroed, "
          "mem += syn_inh); Lava's LIF and SpikecLIF have one current u, and two populations meet only through a "
          "synapse carrying spikes a step later, so the sum has no compartment to form in (a u -> v cascade "
          "matches it only without resets, one step late)")

_ADAPTIVE = ("Norse's {} neuron keeps an adaptation state ({}) with its own decay beside v and i, and its spikes change "
             "it; Lava's LIF holds two states (u, v) and one reset, and a second population would see its spikes a "
             "step late through a synapse, so the adaptation has no compartment to form in; it runs spike-exact in "
             "ONNX and in spikec's interpreter")

TABLE: dict[str, LavaOp] = {
    # spikec's own neurons (spikec.ops.neurons)
    "lif": LavaOp("spikec_lif", zero_reset_variant=True, memoryless_zero_reset=True),
    "intfire": LavaOp("spikec_intfire"),
    "intfire_unrolled": LavaOp("spikec_intfire_substeps"),
    "silif": LavaOp("spikec_silif"),
    "csilif": LavaOp("spikec_csilif"),
    # the frameworks' neurons on the LIF process (framework_neurons.py), in real arithmetic
    "lif_sj": LavaOp("sj_lif"),
    "lif_snntorch": LavaOp("snntorch_leaky", reads={"mem": "v"}, zero_reset_spikes_as="lif", zero_reset_variant=True,
                           integrates_alone=True),
    "synaptic_snntorch": LavaOp("snntorch_synaptic", reads={"mem": "v"}, zero_reset_variant=True,
                                zero_reset_attrs={"reset_delay": False}),
    "rleaky_snntorch": LavaOp("snntorch_rleaky", reads={"mem": "v"}, zero_reset_variant=True,
                              zero_reset_attrs={"reset_delay": False}),
    "lif_norse": LavaOp("norse_lif", reads={"v": "v"}),
    "lif_recurrent_norse": LavaOp("norse_lif_recurrent", reads={"v": "v"}, dense_input_weights=True),
    "li_norse": LavaOp("norse_li", reads={"v": "v"}),
    "and_gate": LavaOp("and"),   # AND neurons of binary products (products.py)
    # rewritten before the mapping, run on the host, or refused
    "lif_sinabs": LavaOp(counts_as_intfire=True),
    "sdna_pairwise": LavaOp(host=HostOp(_PAIRWISE_WHY, lambda out, ins, attrs: 2 * int(attrs["kernel"]) ** 2
                                        * int(np.prod(out)), stateful=True)),
    "alpha_snntorch": LavaOp(refused=_ALPHA),
    "lsnn_norse": LavaOp(refused=_ADAPTIVE.format("LSNN", "the threshold adaptation b")),
    "lif_adex_norse": LavaOp(refused=_ADAPTIVE.format("AdEx", "the adaptation current a, and an exponential term")),
    # spikec.nn.loihi's own integer ops (the exact-source deployment)
    "loihi_lif": LavaOp(exact_source="lava_lif (Lava's LIF or SpikecLIF)", exact_source_neuron=True),
    "loihi_shift": LavaOp(exact_source="Dense's weight_exp < 0"),
}
NONE = LavaOp()


def entry(op: str) -> LavaOp:
    """The table's entry of ``op`` (an entry with no facts for an op the table does not hold)."""
    return TABLE.get(op, NONE)


def having(fact: str) -> tuple[str, ...]:
    """The ops whose entry holds ``fact`` (a field of ``LavaOp``), in the table's order."""
    return tuple(op for op, e in TABLE.items() if getattr(e, fact))
