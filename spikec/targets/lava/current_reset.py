"""The subtract reset on Lava's standard LIF, its membrane kept in the current ``u`` (the Lava target's default;
``lava_reset="subtract"`` keeps SpikecLIF's carry-free form): chip-ready, its integer arithmetic one term away
from the carry-free subtract reset, that term part of the quantization and measured against the carry-free form.

Lava's LIF zeroes ``v`` at a spike but never resets ``u``. So the membrane ``m`` of a subtract-reset neuron lives
in ``u``: ``du = dv_m - 1`` gives ``u`` the membrane's own 12-bit decay (``u <- (4096 - (du + 1)) u / 4096``, the
factor ``4096 - dv_m`` the integer reference decays ``v`` by), and a self-synapse (from the population's ``s_out``
to its own ``a_in``: Lava's Sparse, diagonal, weight ``-w``) lands one Lava step after the spike, after
the decay:

    u_t = dec(u_{t-1}) + (a_t + bias_u - w s_{t-1}) << 6

With ``w = vth`` this is snnTorch's default subtract (``reset_delay=True``: ``mem_t = beta mem_{t-1} + x_t - theta
S_{t-1}``, the ``delayed_subtract`` kind) bit for bit. The spike is Lava's ``v > vth << 6`` with ``dv = 4095``:

    v_t = trunc(v_{t-1} / 4096) + u_t + b        (v_{t-1} = 0 after a spike)

so it compares ``u_t + c_t`` with ``c_t = trunc(v_{t-1} / 4096)``: **the carry**, zero while ``|v| < 4096`` (64
weight LSBs) and otherwise ``|v| / 4096`` internal units (1/64 of a weight LSB per 4096): the one way the form
differs from the carry-free neuron, flipping a spike only when ``u_t`` lies within the carry of the threshold. It
is part of the deployed integer arithmetic as the 12-bit decay's truncation is: the integer reference runs it, Lava
reproduces it bit for bit, ``float_vs_fixed`` measures the quantization as a whole. Beyond the carry, per kind:

- ``delayed_subtract`` (snnTorch Leaky's default): nothing else.
- ``subtract`` (spikec's ``lif``, SpikingJelly's soft reset: ``v -= theta`` at the spiking step, decayed in the
  next): ``dec(m - theta)`` becomes ``dec(m) - w`` with ``w = round(vth (4096 - dv_m) / 4096)``: at most half a
  weight LSB per spike.
- ``fire="ge"`` (SpikingJelly's ``>=``): Lava's bias ``b = 1`` makes ``v > vth << 6`` compare ``u + c >= vth << 6``
  (the bias on ``v`` is not integrated: ``v`` keeps 1/4096).

The neuron's own bias joins ``u`` (``bias_u``, whole weight LSBs: the deployment is quantized with
``bias_unit=64``, so the exact reference integrates the same bias) through ``current_bias.py``'s Dense from the
always-firing LIF. ``vth`` (and ``w``) are weights of the self-synapse: 8-bit mantissas ``m << e`` (``e <= 7``), so
the deployment is quantized with ``vth`` rounded down to 8 significant bits (``vth_override``), the exact reference
with the same threshold. A membrane read (snnTorch's ``mem``, spikec's pre-reset membrane) is ``u``, read by Lava's
Monitor every step.

The self-synapse is Lava's ``Sparse`` with one weight on its diagonal (the identity of the population in any
order of Lava's folded layout, so a ``(C, H, W)`` population takes it as a flat one does).

A recurrence of the neuron's own (RLeaky) stays beside it. ``beta = 1`` takes ``du = 0``: Lava's current has no
exact integrator, so ``u`` keeps 4095/4096 per step (noted). Not changed, each with its reason in the report: a
per-channel decay or threshold, a hard or no reset, a current of its own (Synaptic), a sub-step schedule, a bias
two 8-bit Denses do not hold, a read of the post-reset ``v`` of an immediate reset.
"""
import numpy as np

from spikec.ir.graph import Graph, Node
from spikec.targets.lava import ops as lops
from spikec.targets.lava.current_bias import terms
from spikec.targets.lava.ops import bias_value, primary

VALUE = "current"
KINDS = ("delayed_subtract", "subtract")
SUBTRACTS = KINDS + ("snntorch_subtract",)   # every subtract reset: those the form does not take say why
WEIGHT_EXP_MAX = 7        # Loihi's synaptic weight exponent (docs/targets.md, current biases)
MANTISSA = 255            # an inhibitory 8-bit Dense weight


def eight_bits(x: int, up: bool = False) -> tuple[int, int]:
    """``(m, e)``: ``m << e`` the largest value ``<= x`` (``up``: the nearest, halves up) with ``m <= 255``, ``e <= 7``
    (saturating at ``255 << 7``)."""
    x = int(x)
    for e in range(WEIGHT_EXP_MAX + 1):
        m = (x + ((1 << e) >> 1)) >> e if up else x >> e
        if m <= MANTISSA:
            return m, e
    return MANTISSA, WEIGHT_EXP_MAX


def representable_vth(vth: int) -> int:
    """The threshold the membrane-in-u form deploys: ``vth`` rounded down to an 8-bit mantissa ``m << e`` (the
    self-synapse's weight; rounding down keeps every weight of the population in its 8-bit range)."""
    m, e = eight_bits(vth)
    return max(1, m << e)


SUB_STEPS = "a sub-step schedule (an unrolled integer neuron): Lava's LIF updates every Lava step"
BETA_ONE = ("beta = 1 with the membrane in u: u keeps 4095/4096 per step (du = 0; Lava's current has no exact "
            "integrator), a 1/4096 leak")


def twins(graph: Graph, n: Node) -> list[Node]:
    """The nodes reading a state of population ``n`` (its membrane twins)."""
    return [m for m in graph.nodes if m.op == n.op and m.inputs == n.inputs and not primary(m)]


def on_sub_steps(graph: Graph) -> bool:
    """The graph runs a sub-step schedule (an unrolled integer neuron): Lava's LIF cannot take a membrane in u."""
    return any(m.op == "lava_intfire" and m.attrs.get("unrolled") for m in graph.nodes)


def bias_refusal(p: dict, quantized: bool) -> str | None:
    """Why a population's bias (``bias_mant``/``bias_exp`` of ``p``) cannot move into u through current_bias.py's
    Dense (None: it can). ``quantized=False``: before the deployment is quantized with ``bias_unit=64``."""
    bias = bias_value(np.asarray(p["bias_mant"], dtype=np.int64), np.asarray(p["bias_exp"], dtype=np.int64))
    if not quantized:
        bias = (bias + 32) >> 6 << 6   # what bias_unit=64 makes of it (up to the calibration's rounding)
    if np.any(bias % 64):
        return "its bias is not in whole weight LSBs (the deployment was not quantized with bias_unit=64)"
    if terms(np.unique(bias >> 6)) is None:
        return "its bias is no sum of two 8-bit Dense weights w << weight_exp (current_bias.py)"
    return None


def refusal(graph: Graph, n: Node, quantized: bool = True) -> str | None:
    """Why population ``n`` (a primary ``lava_lif``) keeps SpikecLIF's carry-free form (None: it takes the membrane
    in u). ``quantized=False``: before the deployment is quantized for it (biases in whole weight LSBs)."""
    p, a = n.params, n.attrs
    if a.get("reset") not in KINDS:
        return (f"its reset kind is {a.get('reset')!r}: the membrane in u takes the subtract resets "
                f"{', '.join(KINDS)} (snnTorch's reset_delay=False subtract is neither)")
    if a.get("fire", "gt") not in ("gt", "ge"):
        return "it never fires (a read-out integrator)"
    if "bias_u" in p or "v_reset" in p:
        return "it has a current of its own (Synaptic, a current bias: the membrane cannot also be Lava's u)"
    if any(np.asarray(p[k]).ndim for k in ("du", "dv", "vth")):
        return "per-channel decays or thresholds (Lava's LIF takes one du, dv and vth per process)"
    if int(p["du"]) != 4095:
        return "its input is a decaying current (Lava's u is taken)"
    if on_sub_steps(graph):
        return SUB_STEPS
    why = bias_refusal(p, quantized)
    if why is not None:
        return why
    for t in twins(graph, n):
        if lops.output_of(t) not in ("membrane", "v") or (lops.output_of(t) == "v" and a["reset"] == "subtract"):
            return (f"{t.name!r} reads its {lops.output_of(t)!r} (Lava's u holds the membrane before the reset, "
                    "not after an immediate one)")
    return None


def reset_weight_of(n: Node) -> tuple[int, int]:
    """``(m, e)``: the self-synapse weight ``-(m << e)`` the spike subtracts after the next decay (a delayed
    subtract's ``vth``; any other kind's decayed by the membrane's ``dv``)."""
    vth, dv = int(n.params["vth"]), int(n.params["dv"])
    if n.attrs.get("reset") == "delayed_subtract":   # (an integer-firing neuron has no reset attr: immediate)
        return eight_bits(vth)   # vth itself (deployed representable: representable_vth)
    return eight_bits(round(vth * (4096 - dv) / 4096), up=True)


def rewrite_node(n: Node) -> Node:
    """The population ``n`` (or a membrane twin of it) as Lava's LIF with its membrane in ``u``."""
    p = n.params
    m, e = reset_weight_of(n)
    bias = bias_value(np.asarray(p["bias_mant"], dtype=np.int64), np.asarray(p["bias_exp"], dtype=np.int64))
    ge = n.attrs.get("fire", "gt") == "ge"
    # beta = 1 (dv = 0): u keeps 4095/4096 (du = 0), Lava's u has no exact integrator (ds_offset = 1)
    params = {**{k: v for k, v in p.items() if k == "rec_weight"},
              "du": np.int64(max(int(p["dv"]) - 1, 0)), "dv": np.int64(4095), "vth": np.int64(int(p["vth"])),
              "bias_mant": np.full(np.shape(p["bias_mant"]), int(ge), dtype=np.int64),
              "bias_exp": np.zeros(np.shape(p["bias_exp"]), dtype=np.int64),
              "reset_weight": np.int64(-m)}
    if (bias >> 6).any():
        params["bias_u"] = bias >> 6
    attrs = {k: v for k, v in n.attrs.items() if k not in ("fire",)}
    attrs.update(reset="zero", process="LIF", reset_weight_exp=e, membrane_in_u=n.attrs["reset"])
    if not primary(n):
        attrs = lops.output_attrs(attrs, "u")
    return n.with_(attrs=attrs, params=params)


def apply(graph: Graph) -> tuple[Graph, list[str], dict]:
    """``(graph with the changed populations, their names, {population: why not} for the other subtract resets,
    the reason also on their nodes as ``membrane_in_u_refused``)``; the graph itself when no reset is a subtract."""
    changed, refused, read = [], {}, set()
    for n in graph.nodes:
        if n.op != "lava_lif" or not primary(n):
            continue
        why = refusal(graph, n)
        vth = int(n.params["vth"])
        if why is None and n.attrs["reset"] == "delayed_subtract" and representable_vth(vth) != vth:
            # deploy() quantized vth to an 8-bit mantissa; another vth cannot be the self-synapse's weight
            why = f"vth = {vth} is no 8-bit mantissa m << e (set by vth_override)"
        if why is None:
            changed.append(n.name)
            read.update(t.name for t in twins(graph, n))
        elif n.attrs.get("reset") in SUBTRACTS:
            refused[n.name] = why
    if not changed and not refused:
        return graph, changed, refused

    def deployed(n):
        if n.name in changed or n.name in read:
            return rewrite_node(n)
        if n.name in refused:   # the chip-blocker line says why
            return n.with_(attrs=dict(n.attrs, membrane_in_u_refused=refused[n.name]))
        return n
    return Graph(tuple(map(deployed, graph.nodes)), graph.outputs, graph.meta), changed, refused


def candidates(graph: Graph) -> dict[str, int]:
    """``{population: the vth it deploys}`` for the populations the form would change (before requantizing)."""
    return {n.name: representable_vth(int(n.params["vth"])) for n in graph.nodes
            if n.op == "lava_lif" and primary(n) and refusal(graph, n, quantized=False) is None}


def _agreement(a, b, spikes: bool) -> dict:
    a, b = np.asarray(a), np.asarray(b)
    if spikes:
        return {"spike_agreement": float((a == b).mean()) if a.size else 1.0,
                "spikes_carry_free": int(np.abs(a).sum()), "spikes_deployed": int(np.abs(b).sum()),
                "steps_differing": int((a != b).sum())}
    ca, cb = a.sum(0).reshape(a.shape[1], -1).argmax(-1), b.sum(0).reshape(b.shape[1], -1).argmax(-1)
    return {"values_equal": float((a == b).mean()) if a.size else 1.0, "class_agreement": float((ca == cb).mean()),
            "max_abs_difference": int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0))}


def measure(exact: Graph, variant: Graph, changed: list, refused: dict, ref: dict, trace) -> dict:
    """The deployed form (``trace``: its integer run with read-out twins) against the carry-free integer reference
    ``exact`` (``ref``: its run on the same integer inputs): spikes per changed population, every output, and the
    carry (``v - u - b`` before the spike test: nonzero where ``|v| >= 4096``)."""
    per, carry = {}, {}
    for name in changed:
        per[name] = _agreement(ref[name], trace.values[name], True)
        n = variant.node(name)
        b = bias_value(np.asarray(n.params["bias_mant"], dtype=np.int64), np.asarray(n.params["bias_exp"], dtype=np.int64))
        if b.ndim:   # per channel: channels first in each sample's (C, ...) layout
            b = b.reshape(b.shape + (1,) * (len(n.type.shape) - 1))
        c = np.asarray(trace.values[f"{name}.membrane"]) - np.asarray(trace.values[f"{name}.u"]) - b
        carry[name] = {"neuron_steps": int(c.size), "nonzero": int((c != 0).sum()),
                       "max_abs": int(np.abs(c).max(initial=0))}
    got = lops.ladder_counts(variant, trace.values)   # a count ladder's copies summed into its count
    outputs = {o: _agreement(ref[o], got[o], variant.node(o).type.is_spike) for o in exact.outputs}
    return {"populations": changed, "kept_custom": refused, "per_population": per, "carry": carry,
            "outputs": outputs,
            "compared_with": "the carry-free integer subtract reset of the same weights, thresholds and biases "
                             "(SpikecLIF's arithmetic, lava_reset='subtract'), on the verification inputs",
            "rule": "a subtract reset is Lava's LIF with the membrane in its current u (du = dv - 1, dv = 4095, a -vth "
                    "diagonal Sparse self-synapse): its integer arithmetic carries trunc(v / 4096) of v between "
                    "steps, part of the quantization like the 12-bit decay (float_vs_fixed measures the whole); "
                    "Lava runs it bit for bit (current_reset.py)"}


def line(v: dict) -> str:
    """One summary line: the populations with the membrane in u and how they differ from the carry-free form."""
    parts = [f"{c} spikes {100 * a['spike_agreement']:.2f}% (carry nonzero at {v['carry'][c]['nonzero']:,} of "
             f"{v['carry'][c]['neuron_steps']:,} neuron-steps)" for c, a in v["per_population"].items()]
    for o, a in v["outputs"].items():
        parts.append(f"output {o} " + (f"spikes {100 * a['spike_agreement']:.2f}%" if "spike_agreement" in a
                                       else f"classes {100 * a['class_agreement']:.2f}% (values equal "
                                            f"{100 * a['values_equal']:.2f}%)"))
    kept = f"; kept as SpikecLIF: {', '.join(f'{k} ({w})' for k, w in v['kept_custom'].items())}" \
        if v["kept_custom"] else ""
    return (f"subtract resets as Lava's LIF, the membrane in u: {', '.join(v['populations'])} (their integer arithmetic "
            f"carries trunc(v / 4096) between steps); against the carry-free integer subtract reset on the "
            f"verification inputs: {', '.join(parts)}{kept}")
