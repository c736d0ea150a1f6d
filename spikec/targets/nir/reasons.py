"""Why the NIR export refuses an op (``REASONS``: no lowering; ``VARIANT_REASONS``: the variants a lowering refuses)
and what compiles instead (``REMEDIES``; else ``REMEDY``). Apart from ``export`` to keep both modules short.

The one table of ``targets/nir`` keyed by neuron op: the op names are here (from the op's card module where it
exports one), and every other module of the package imports them from here (``tests/test_op_mentions.py``)."""
from spikec.frontend.norse_recurrent import OP as LIF_RECURRENT_NORSE  # noqa: F401 (a name of this table)
from spikec.frontend.snntorch_neurons import ALPHA_SNNTORCH, LIF_SNNTORCH, RLEAKY_SNNTORCH, SYNAPTIC_SNNTORCH
from spikec.ops.neurons import CSILIF, LIF, SILIF  # noqa: F401 (names of this table)

LIF_SJ, LIF_NORSE, LI_NORSE, LIF_SINABS = "lif_sj", "lif_norse", "li_norse", "lif_sinabs"
INTFIRE, INTFIRE_UNROLLED = "intfire", "intfire_unrolled"
SUBSTEP_SUM = "substep_sum"

REASONS = {
    INTFIRE: "integer spikes (multi-spike payloads) have no NIR node: NIR neurons emit binary events",
    INTFIRE_UNROLLED: "virtual sub-steps have no NIR form: NIR has one time base",
    SUBSTEP_SUM: "virtual sub-steps have no NIR form: NIR has one time base",
    "mul": "a dynamic product of two tensors has no NIR node (NIR edges only sum)",
    "bntt": "per-time-step BN (BNTT) scales each step differently; NIR parameters are static",
    "step_bias": "a per-time-step bias schedule has no static NIR form",
    "relu": "NIR has no ReLU node",
    "dsmpa": "dense attention (DS-MPA) runs on a host and has no NIR node",
    SILIF: "SiLIF is not exported (no NIR neuron with its reset-before-decay form is implemented here)",
    CSILIF: "CSiLIF has a complex state; NIR has no resonate-and-fire neuron",
    # the frameworks' exact neurons (spikec/frontend): the variants their converters cannot make spikec's lif
    ALPHA_SNNTORCH: "snnTorch's Alpha has two synaptic currents (syn_exc, syn_inh) with their own decays and "
                      "mem = tau * (syn_exc + syn_inh); NIR has no neuron with two currents (CubaLIF has one)",
}
# ops that lower some variants (their lowering refuses the others with this reason)
VARIANT_REASONS = {
    LIF_NORSE: "Norse's LIFCell / LIFBoxCell read as v or i, resting at v_leak != 0, or with LIFBox's subtract reset, "
                 "is not lowered to NIR: NIR's LIF and CubaLIF output spikes only, start at 0 and reset to v_reset "
                 "(its spikes, resting at 0 and reset to a value, are exported: LIFCell as CubaLIF, LIFBoxCell as LIF)",
    LIF_SNNTORCH: "snnTorch's Leaky with reset_delay=False and a subtract reset, or no reset (or a zero reset with "
                    "reset_delay=False and a negative threshold), is not lowered to NIR: NIR's LIF resets to v_reset "
                    "on the step it fires, and the subtract-reset composition written here (LI + Threshold + a "
                    "-threshold feedback, read one step late) is the default reset_delay=True only",
    LIF_SJ: "SpikingJelly's neuron with a reset value other than 0, decay_input=False, or a tau that is not a power "
              "of two (its soft reset with decay_input=True is exported, as a CubaLIF cycle), is not lowered to "
              "NIR: NIR's LIF resets to v_reset on the step it fires and its Euler step (scheme 'norse') computes "
              "v + (dt/tau) (I - v), which is SpikingJelly's charge V + (X - V) / tau bit for bit only when "
              "multiplying by 1/tau is dividing by tau (tau a power of two, or ParametricLIFNode's decay k); "
              "written for snnTorch (scheme 'snntorch', beta v + I) it rounds differently",
    RLEAKY_SNNTORCH: "snnTorch's RLeaky with a zero or no reset, reset_delay=False, read as mem, a conv2d "
                       "recurrence, a negative threshold or mixed beta = 1 / < 1 is not lowered to NIR: NIR's LIF "
                       "resets on the step it fires, and the composition written here (the default subtract reset, "
                       "reset_delay=True: a CubaLIF with a -threshold and the recurrence fed back, read one step "
                       "late) covers the spikes of a linear or one-to-one recurrence only",
    SYNAPTIC_SNNTORCH: "snnTorch's Synaptic/RSynaptic with no reset, a zero reset with reset_delay=True, a subtract "
                         "reset with reset_delay=False or a recurrence, a negative threshold, or read as mem, is not "
                         "lowered to NIR: NIR's CubaLIF resets to v_reset on the step it fires and outputs no "
                         "membrane (the default subtract reset, reset_delay=True, is an LI + CubaLIF reset cycle); a "
                         "conv or one-to-one recurrence, or one snnTorch adds after alpha * syn + x (NIR sums a "
                         "node's inputs first: another rounding), has no exact NIR cycle here",
    LI_NORSE: "Norse's LIBoxCell, an LICell read as i, or one resting at v_leak != 0, is not lowered to NIR: NIR's "
                "CubaLI starts at 0 and outputs v (an LICell read as v, v_leak = 0, is exported as CubaLI)",
}
REMEDY = "keep this model on another target (--target none/onnx), or replace the node with an exportable op"
# what a user can do instead, per op refused by name (else REMEDY): each alternative named here is one that
# compiles (tests/targets/nir/test_nir_framework_refusals.py compiles each)
REMEDIES = {
    LIF_SNNTORCH: "compile with --target onnx, which lowers lif_snntorch exactly (spikes and mem); for NIR, use "
                    "the default Leaky (subtract reset, reset_delay=True: exported as a CubaLIF reset cycle, or "
                    "LI/I + Threshold + a reset cycle for its mem or beta = 1), or reset_mechanism='zero' (with "
                    "reset_delay=False only if every threshold is >= 0) returning only its spikes: spikec converts "
                    "that to its own lif (NIR LIF)",
    SYNAPTIC_SNNTORCH: "compile with --target onnx, which lowers synaptic_snntorch exactly (spikes, syn, mem, any "
                         "recurrence); for NIR, use a Synaptic (not RSynaptic) with reset_mechanism='zero', "
                         "reset_delay=False and every threshold >= 0, returning its spikes and syn (not mem): spikec "
                         "converts that to its own lif nodes, which NIR exports",
    RLEAKY_SNNTORCH: "compile with --target onnx, which lowers rleaky_snntorch exactly (spikes and mem, any "
                       "recurrence); for NIR, use the default RLeaky (reset_mechanism='subtract', reset_delay=True) "
                       "with all_to_all (linear_features) or one-to-one (V) recurrence, returning only its spikes",
    ALPHA_SNNTORCH: "compile with --target onnx, which lowers alpha_snntorch exactly (spikes, syn_exc, syn_inh, "
                      "mem)",
    LIF_SJ: "compile with --target onnx, which lowers lif_sj exactly (LIFNode, ParametricLIFNode, IFNode with "
              "another hard reset); for NIR, use IFNode, LIFNode(tau=2.0, decay_input=False) (spikec's own lif), "
              "LIFNode / ParametricLIFNode with a soft reset (v_reset=None) and decay_input=True, or with "
              "decay_input=True and v_reset=0.0 (tau a power of two), written with --nir-consumer any or norse",
    LIF_NORSE: "compile with --target onnx, which lowers lif_norse exactly (spikes, v and i); for NIR, return "
                 "only the spikes of a LIFCell / LIFBoxCell with v_leak = 0 and reset_method reset_value",
    LI_NORSE: "compile with --target onnx, which lowers li_norse exactly (v and i); for NIR, return only v of "
                "an LICell resting at v_leak = 0",
}
