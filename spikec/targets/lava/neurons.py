"""Per-neuron fixed-point parameters: decays, thresholds, resets and biases of each neuron kind.

Per output channel ``c``, the integer membrane is ``v ~ 64 s_c U`` with ``s_c = VTH / theta_c``,
threshold-normalized so that one integer VTH serves the population:

- lif        ``U = beta H + alpha X + bias``: Lava's LIF (hard reset, scalar parameters) or the custom
             SpikecLIF; ``dv = round(4096 (1 - beta))``, ``du = 4095``, bias mantissa/exponent;
- intfire    the integer-firing neuron (semantics 1.2) with the same arithmetic: graded payload
             ``S = clip(round(v / (VTH << 6)), 0, D)`` (custom SpikecIntFire), or, after
             ``unroll_virtual_steps`` (``intfire_unrolled``), the same count replayed as D binary sub-steps;
- silif      ``u = a (u - kappa s) + b x``: decay ``A = round(4096 a)`` (12-bit, *approximate*),
             ``K = round(64 s_c kappa)``, threshold ``>=`` (custom SpikecSiLIF);
- csilif     the complex state as two integer states (real v, imaginary w), decays
             ``round(4096 a_re)``, ``round(4096 a_im)`` (*approximate*), threshold on ``2 Re(m)``.

``FORMS`` holds the lowerings, one ``NeuronLowering`` each (its population kind, float parameters per channel,
refusals, and the integer node it becomes); ``NEURONS``, keyed by the float op, is the view of the target's table
(``ops_table.TABLE``, where each neuron op names its form).
"""
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from spikec.ir.errors import IRError
from spikec.ir.graph import Node, TensorType
from spikec.targets.lava.fixed_point import (DECAY_MAX, DECAY_ONE, VTH_MAX, bias_mant_exp, dense_weights,
                                             round_weights, scalar_or_channels)
from spikec.targets.lava import ops as lops
from spikec.targets.lava.and_neurons import and_node, and_params
from spikec.targets.lava.limits import to_int
from spikec.targets.lava.ops_table import (KIND_AND, KIND_CSILIF, KIND_INTFIRE, KIND_LIF, KIND_SILIF, TABLE,
                                           having)
from spikec.targets.lava.refusal import refuse


@dataclass(frozen=True)
class NeuronLowering:
    """How the Lava target lowers one float neuron op.

    ``params(get)``: float parameters per channel, ``get(name, default=0.0)`` reading the node's parameter
    broadcast to ``(C,)``: alpha (input gain), threshold (firing level of the integer state's variable), beta
    or decays, the neuron's own bias, and what else the kind needs. ``build(pop, p, x, scale, vth, mant, exp)``:
    the integer neuron node reading the synaptic sum ``x``. ``check(pop, p)``: refuse what has no Loihi form."""
    kind: str                        # the population kind (mapping.Population.kind)
    params: Callable[[Callable], dict]
    build: Callable
    check: Callable | None = None
    with_node: bool = False          # params(get, node): the float node's attributes choose the form


def lowering(node: Node) -> NeuronLowering:
    if node.op not in NEURONS:
        raise IRError(f"op {node.op} is not a neuron the Lava target lowers", where=f"node {node.name!r}",
                      remedy=f"Lava neurons: {', '.join(NEURONS)}")
    return NEURONS[node.op]


def neuron_params(node: Node, c: int) -> dict:
    """Float parameters per channel of neuron ``node`` (``NeuronLowering.params``)."""
    get = lambda k, default=0.0: np.broadcast_to(np.array(node.params.get(k, default), dtype=np.float64),
                                                 (c,)).copy()
    lower = lowering(node)
    return lower.params(get, node) if lower.with_node else lower.params(get)


def check_neuron(pop, p: dict) -> None:
    """Refuse thresholds and decays with no Loihi form."""
    check = lowering(pop.neuron).check
    if check is not None:
        check(pop, p)


def _check_lif(pop, p: dict) -> None:
    if (p["threshold"] < 0).any():
        raise refuse(pop.neuron, "a negative threshold has no Loihi form")
    _check_beta(pop, p)


def _check_beta(pop, p: dict) -> None:
    if ((p["beta"] < 0) | (p["beta"] > 1)).any():
        raise refuse(pop.neuron, "beta outside [0, 1] is not a 12-bit decay")


def membrane_gain(pop) -> np.ndarray:
    """Integer membrane units per float unit of the neuron's ``U`` (per channel)."""
    return 64 * pop.scale / (2 if pop.kind == KIND_CSILIF else 1)


def neuron_node(pop, p: dict, x: str, scale: np.ndarray, vth: np.ndarray) -> Node:
    """The integer neuron node of ``pop`` reading the synaptic sum ``x``; its parameters recorded in ``pop.info``."""
    # a current-based neuron's synaptic bias is a current (``bias_u``, see _lif_node); the rest biases v; a
    # recurrence's bias (``rec_bias``, input units) joins the synaptic bias
    rec_b = p.get("rec_bias", 0.0)
    b = p["bias"] if p.get("current") else p["alpha"] * (pop.bias + rec_b) + p["bias"]
    bias_v = to_int(np.round(64 * scale * b / pop.bias_unit) * pop.bias_unit, node=pop.name,
                    what="neuron biases (64 s b)")
    mant, exp, sat = bias_mant_exp(bias_v)
    pop.info.update(bias_saturated=sat, bias_exp_max=int(exp.max(initial=0)),
                    scale=scale.tolist() if np.ptp(scale) else float(scale[0]), vth=scalar_or_channels(vth).tolist())
    return lowering(pop.neuron).build(pop, p, x, scale, vth, mant, exp)


def _lif_decay(beta: np.ndarray, node: str = "") -> np.ndarray:
    return to_int(np.clip(np.round(4096 * (1 - beta)), 0, DECAY_MAX), node=node, what="decays (4096 (1 - beta))")


def _u_decay(factor: np.ndarray, node: str) -> np.ndarray:
    """Lava's ``du`` for a current kept by ``factor`` per step: ``u <- (4096 - (du + 1)) u / 4096``."""
    return to_int(np.clip(np.round(4095 - DECAY_ONE * factor), 0, DECAY_MAX), node=node,
                  what="current decays (4095 - 4096 alpha)")


def _lif_node(pop, p, x, scale, vth, mant, exp) -> Node:
    """The ``lava_lif`` node: spikec's lif, or a framework neuron whose ``p`` names its integer form (``reset``
    kind, ``fire`` comparison, current decay ``u_keep`` and ``current`` bias; framework_neurons.py)."""
    dv = _lif_decay(p["beta"], pop.name)
    reset = p.get("reset", pop.neuron.attrs.get("reset"))
    fire = p.get("fire", "gt")
    du = _u_decay(p["u_keep"], pop.name) if "u_keep" in p else np.full(dv.shape, 4095, dtype=np.int64)
    v_reset = to_int(np.round(64 * scale * p["v_reset"]), node=pop.name, what="reset values (64 s v_reset)")
    params = {"du": scalar_or_channels(du), "dv": scalar_or_channels(dv), "vth": scalar_or_channels(vth),
              "bias_mant": mant, "bias_exp": exp}
    if reset == "zero" and (v_reset != 0).any():
        params["v_reset"] = scalar_or_channels(v_reset)
    if p.get("current"):
        bias_u = to_int(np.round(scale * p["alpha"] * (pop.bias + p.get("rec_bias", 0.0))), node=pop.name,
                        what="current biases (s alpha b)")
        if bias_u.any():
            params["bias_u"] = scalar_or_channels(bias_u)
    rec_attrs = _recurrent(pop, p, scale, params)
    # a current bias reaches Lava's LIF through a Dense from an always-firing LIF (current_bias.py; the lowering
    # keeps SpikecLIF where that is not exact)
    lava_lif = reset == "zero" and fire == "gt" and "v_reset" not in params \
        and all(params[k].ndim == 0 for k in ("du", "dv", "vth")) and int(params["vth"]) <= VTH_MAX \
        and not pop.membrane and not pop.reads
    process = "LIF" if lava_lif else "SpikecLIF"
    never = fire == "never"   # a read-out integrator (Norse's LI): its output is its state v, recorded every step
    node = Node(pop.name, "lava_lif", (x,), TensorType(pop.out_shape, "real" if never else "binary"),
                {"reset": reset, **lops.output_attrs({}, "v" if never else "spikes"), "process": process,
                 **({"fire": fire} if fire != "gt" else {}), **({"primary": True} if never else {}), **rec_attrs},
                params, scope=pop.name)
    pop.info.update(process=process, dv=params["dv"].tolist(), du=params["du"].tolist(), reset=reset,
                    beta_effective=(1 - params["dv"] / 4096).tolist(), lowering="binary spikes")
    if "u_keep" in p:
        pop.info["current_decay_quantization"] = _approx("u_keep", p["u_keep"], (4095 - du) / DECAY_ONE)
    if never:
        pop.info.update(fire="never (a leaky integrator read-out: its state v is the output)",
                        lowering="state read-out: v recorded every step (SpikecLIF v_out)")
    elif fire != "gt":
        pop.info["fire"] = "v >= vth << 6 (the source fires on >=)"
    if (p["beta"] == 0).any():
        pop.info.setdefault("notes", []).append("beta = 0 maps to dv = 4095: 1/4096 of v survives a step")
    if p.get("notes"):
        pop.info.setdefault("notes", []).extend(p["notes"])
    return node


def _recurrent(pop, p, scale, params) -> dict:
    """The self-synapse of a recurrent neuron (``p["rec_kind"]``): its integer weights at the population's scale
    (8-bit, one sign mode, round to nearest, as any synapse) to ``params["rec_weight"]``; returns its attrs."""
    if "rec_kind" not in p:
        return {}
    w = p["rec_weight"] * p["alpha"].reshape((-1,) + (1,) * (p["rec_weight"].ndim - 1))
    wq, mode, info = round_weights(w, scale, 1.0, node=pop.name, what="recurrent weights")
    attrs = {"recurrent": p["rec_kind"]}
    if p["rec_kind"] == "dense":
        params["rec_weight"], attrs["rec_weight_exp"] = dense_weights(wq, mode)
    else:
        params["rec_weight"], attrs["rec_padding"] = wq, [int(v) for v in p["rec_padding"]]
    pop.info["recurrence"] = {"synapse": f"{pop.name}.recurrent", "process": "Dense" if p["rec_kind"] == "dense"
                              else "Conv", "from": "s_out", "to": "a_in",
                              "latency": "one Lava step: the previous physical step's spikes", **info}
    return attrs


def _intfire_node(pop, p, x, scale, vth, mant, exp, unrolled=False) -> Node:
    n = pop.neuron
    d = int(n.attrs["max_spikes"])
    dv = _lif_decay(p["beta"], pop.name)
    params = {"du": np.int64(4095), "dv": scalar_or_channels(dv), "vth": scalar_or_channels(vth),
              "bias_mant": mant, "bias_exp": exp}
    if "v_min" in p:   # the membrane's floor in its integer units (64 s U, as v_reset), rounded to nearest
        params["v_min"] = scalar_or_channels(to_int(np.round(64 * scale * p["v_min"]), node=pop.name,
                                                    what="membrane floors (64 s v_min)"))
        pop.info["v_min"] = params["v_min"].tolist()
    t = TensorType(pop.out_shape, "binary", None, d) if unrolled else TensorType(pop.out_shape, "integer", d)
    node = Node(pop.name, "lava_intfire", (x,), t, {"max_spikes": d, "rounding": n.attrs["rounding"],
                                                    "unrolled": unrolled, "output": "spikes"}, params, scope=pop.name)
    lowering = (f"unrolled: the count S replayed as binary spikes over D = {d} Lava sub-steps per physical step "
                "(thermometer code), read by binary synapses" if unrolled else
                f"graded payload: S in 0..{d} sent as a graded spike ({max(1, d.bit_length())} message bits) "
                "read by Dense/Conv with num_message_bits > 0")
    pop.info.update(process="SpikecIntFire", lowering=lowering, max_spikes=d, rounding=n.attrs["rounding"],
                    dv=params["dv"].tolist(), du=4095, beta_effective=(1 - params["dv"] / 4096).tolist())
    return node


def _approx(name, f, q) -> dict:
    err = np.abs(q - f)
    return {f"{name}_float": f.tolist(), f"{name}_fixed": q.tolist(),
            f"{name}_max_abs_error": float(err.max(initial=0))}


def _silif_node(pop, p, x, scale, vth, mant, exp) -> Node:
    a = p["decay"]
    if ((a < 0) | (a > 1)).any():
        raise refuse(pop.neuron, "a SiLIF decay outside [0, 1]")
    aq = to_int(np.clip(np.round(DECAY_ONE * a), 0, DECAY_ONE), node=pop.name, what="decays (4096 a)")
    kappa = float(pop.neuron.attrs["kappa"])
    k = to_int(np.round(64 * scale * kappa), node=pop.name, what="resets (64 s kappa)")
    params = {"decay": scalar_or_channels(aq), "vth": scalar_or_channels(vth), "kappa": scalar_or_channels(k),
              "bias_mant": mant, "bias_exp": exp}
    node = Node(pop.name, "lava_silif", (x,), TensorType(pop.out_shape, "binary"), {"output": "spikes"}, params,
                scope=pop.name)
    pop.info.update(process="SpikecSiLIF", lowering="binary spikes", approximate=True,
                    decay_quantization=_approx("decay", a, aq / DECAY_ONE),
                    kappa_quantization=_approx("kappa", np.full_like(scale, kappa), k / (64 * scale)),
                    note="12-bit decay A = round(4096 a) (approximate); the decay rounds toward zero like Lava's LIF")
    return node


def _csilif_decays(are: np.ndarray, aim: np.ndarray, node: str) -> tuple[np.ndarray, np.ndarray]:
    qre = to_int(np.round(DECAY_ONE * are), node=node, what="decays (4096 a_re)")
    qim = to_int(np.round(DECAY_ONE * aim), node=node, what="decays (4096 a_im)")
    unstable = qre ** 2 + qim ** 2 >= DECAY_ONE ** 2
    while unstable.any():   # keep the fixed-point pole inside the unit circle, as the float one is
        qre = np.where(unstable, qre - np.sign(qre), qre)
        qim = np.where(unstable, qim - np.sign(qim), qim)
        unstable = qre ** 2 + qim ** 2 >= DECAY_ONE ** 2
    return qre, qim


def _csilif_node(pop, p, x, scale, vth, mant, exp) -> Node:
    are, aim = p["a_re"], p["a_im"]
    qre, qim = _csilif_decays(are, aim, pop.name)
    kappa = float(pop.neuron.attrs["kappa"])
    k = to_int(np.round(64 * scale * kappa), node=pop.name, what="resets (64 s kappa)")
    params = {"a_re": scalar_or_channels(qre), "a_im": scalar_or_channels(qim), "vth": scalar_or_channels(vth),
              "kappa": scalar_or_channels(k), "bias_mant": mant, "bias_exp": exp}
    node = Node(pop.name, "lava_csilif", (x,), TensorType(pop.out_shape, "binary"), {"output": "spikes"}, params,
                scope=pop.name)
    pole_err = np.abs((qre + 1j * qim) / DECAY_ONE - (are + 1j * aim))
    pop.info.update(process="SpikecCSiLIF", lowering="binary spikes", approximate=True,
                    decay_quantization={**_approx("a_re", are, qre / DECAY_ONE),
                                        **_approx("a_im", aim, qim / DECAY_ONE),
                                        "pole_max_abs_error": float(pole_err.max(initial=0)),
                                        "pole_magnitude_fixed_max": float(np.abs(qre + 1j * qim).max() / DECAY_ONE)},
                    kappa_quantization=_approx("kappa", np.full_like(scale, kappa), k / (64 * scale)),
                    note="complex state as two 24-bit integer states (v = Re m, w = Im m); signed 12-bit "
                         "fractional decays (approximate); threshold on Re m >= threshold / 2")
    return node


def _lif_params(get) -> dict:
    return {k: get(k) for k in ("beta", "alpha", "bias", "threshold", "v_reset")}


def _intfire_params(get, node) -> dict:
    p = {"beta": get("beta"), "alpha": get("alpha"), "bias": get("bias"), "threshold": get("threshold")}
    if "v_min" in node.params:   # Sinabs's min_v_mem: a clamp of the residual (membrane units, as the threshold)
        p["v_min"] = get("v_min")
    return p


def _silif_params(get) -> dict:
    return {"decay": get("decay"), "alpha": get("b"), "bias": get("bias"), "threshold": get("threshold")}


def _csilif_params(get) -> dict:
    # s = [2 Re(m) >= threshold]: the integer state is Re(m), its firing level threshold / 2
    return {"a_re": get("a_re"), "a_im": get("a_im"), "alpha": get("b"), "bias": get("bias"),
            "threshold": get("threshold") / 2}


def _framework() -> dict:
    from spikec.targets.lava.framework_neurons import FORMS as FRAMEWORK
    return {form: NeuronLowering(KIND_LIF, params, _lif_node, check, with_node=True)
            for form, (params, check) in FRAMEWORK.items()}


# the fixed-point lowerings, by form (``ops_table.LavaOp.form``: the table says which op lowers through which)
FORMS: dict[str, NeuronLowering] = {
    "spikec_lif": NeuronLowering(KIND_LIF, _lif_params, _lif_node, _check_lif),
    "spikec_intfire": NeuronLowering(KIND_INTFIRE, _intfire_params, _intfire_node, _check_beta, with_node=True),
    "spikec_intfire_substeps": NeuronLowering(KIND_INTFIRE, _intfire_params, partial(_intfire_node, unrolled=True),
                                              _check_beta, with_node=True),
    "spikec_silif": NeuronLowering(KIND_SILIF, _silif_params, _silif_node),
    "spikec_csilif": NeuronLowering(KIND_CSILIF, _csilif_params, _csilif_node),
    **_framework(),   # snnTorch, SpikingJelly and Norse neurons on the LIF process (framework_neurons.py)
    "and": NeuronLowering(KIND_AND, and_params, and_node),   # AND neurons of binary products (products.py)
}
# the neuron ops the target lowers, keyed by op: the table's entries with a form
NEURONS: dict[str, NeuronLowering] = {op: FORMS[TABLE[op].form] for op in having("form")}
