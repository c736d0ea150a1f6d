"""The framework-exact neurons (snnTorch, SpikingJelly, Norse) as Lava LIF populations, in real arithmetic.

Each entry maps a float op onto the ``lava_lif`` form ``U = beta H + alpha X (+ a current) `` with a threshold, a
reset kind and a firing comparison (``neurons._lif_node`` builds the integer node; ``ops.py`` documents it):

- ``lif_sj`` (IF / LIF / PLIF, ``k = 1/tau`` or the PLIF decay): the state shifted by ``r`` (``v_reset``, 0 for a
  soft reset) so that it starts at 0: ``W = V - r``, ``W_H = (1 - k) W + k X`` (decay_input) or ``+ X``;
  IF: ``W_H = W + X``. Fires ``W_H >= theta - r`` (``fire="ge"``); soft reset subtracts theta (= the threshold,
  r = 0), hard reset returns W to 0. Lava's own LIF cannot compare ``>=``: it runs in SpikecLIF.
- ``lif_snntorch`` (Leaky): beta, alpha = 1, fires ``mem > theta``. Its ``mem`` read alone with no reset (the
  membrane read-out, ``reset_mechanism="none"``, spikes unused) is a population that never fires, like Norse's LI. Resets: subtract with ``reset_delay``
  (snnTorch's default, ``U_t = beta U_{t-1} + X_t - theta S_{t-1}``) is ``delayed_subtract``: the reset of a
  spike acts after the next step's decay, a state of SpikecLIF (exact; an inhibitory self-synapse would need a
  reset-free Lava LIF, which Lava does not have, and a cycle in the process graph). Zero reset (either delay)
  is Lava's hard reset (``(1 - r) mem`` before the decay: the same spikes); ``reset_delay=False`` subtract is
  ``snntorch_subtract`` (``s = [pre - theta r > theta]``, ``v = pre - theta s``, r the stored state's
  spike); none never resets.
- ``synaptic_snntorch`` (Synaptic, no recurrence): the synaptic current is Lava's ``u`` kept ``alpha`` per step
  (``du = 4095 - round(4096 alpha)``), ``mem = beta mem + syn``: the synapse's bias is a current
  (``bias_u``). Zero reset with ``reset_delay`` zeroes the step after a spike (``mem = b (1 - r)``):
  ``delayed_zero``; other resets as Leaky's.
- ``lif_norse`` (LIF / LIFBox): the state shifted by ``v_leak`` (it starts at rest, W = 0): with a current,
  ``u ~ a_mem i'`` kept ``1 - a_syn`` per step, input gain ``a_mem`` (its bias a current too), ``W~ = (1 - a_mem)
  W + u``; without, ``W~ = (1 - a_mem) W + a_mem X``. Fires ``W~ > v_th - v_leak``; reset to ``v_reset - v_leak``,
  or (LIFBox) subtract ``v_th`` (refused unless ``v_leak = 0``: Lava's subtract removes the threshold).

- ``li_norse`` (LI / LICell, the usual read-out layer): ``lif_norse``'s current-based form (``u ~ a_mem i'`` kept
  ``1 - a_syn``, input gain ``a_mem``; LIBox: ``W~ = (1 - a_mem) W + a_mem X``) on a SpikecLIF that never fires
  (``fire="never"``, no reset); its state ``W = v - v_leak`` is recorded every step as the population's output
  (``v`` of SpikecLIF, mapped back as ``v / (64 s) + v_leak``). A weight-range scale (no threshold).

State reads as graph outputs (``ops_table.LavaOp.reads``): the integer value a framework neuron's ``read`` of its state is, bit
for bit in the integer reference: snnTorch's ``mem`` (every reset kind: the delayed kinds and ``none`` have no reset
after the spike, so ``mem`` is the post-step ``v``; ``reset_delay=False`` subtract returns ``base - s theta`` and zero
``(1 - s) base``, the post-reset ``v`` too), Norse's ``v`` (post-reset, shifted by ``v_leak``). Currents (snnTorch's
``syn``, Norse's ``i``) are Lava's ``u``, not recorded: refused as outputs.

- ``rleaky_snntorch`` (RLeaky) and ``synaptic_snntorch`` with a recurrence (RSynaptic): Leaky's / Synaptic's form
  (the zero reset after the decay, ``delayed_zero``, as Synaptic's) plus a self-synapse from the population's
  ``s_out`` to its own ``a_in`` (``_recurrence``): linear a Dense (N, N), conv2d a Conv (stride 1, same padding),
  one_to_one ``V`` a diagonal Dense (a 1x1 diagonal Conv on (C, H, W)); its weights quantized like any synapse at
  the population's scale, its bias joins the population's (the current's, for RSynaptic). Lava's Dense/Conv
  deliver the spikes of Lava step n at step n + 1, so the loop carries the previous physical step's spikes, as
  snnTorch's ``rec(spk_prev)`` does (the integer reference: ``ops.lava_lif``'s ``rec_weight``).

- ``lif_recurrent_norse`` (LIFRecurrentCell / LIFRecurrent): ``lif_norse`` with a current and a value reset, its
  ``input_weights`` a Dense of their own into the population (``placement.split_norse_input`` rewrites the float
  op to read ``linear(x, W_in)`` through identity input weights: the same float values) and its
  ``recurrent_weights`` a Dense from its ``s_out`` back to its ``a_in`` (as RSynaptic's: ``i' = i + W_in x +
  W_rec z_prev`` is the current, the loop's weights at gain ``a_mem`` like the input's).

Refused by name (``NO_MAPPING`` in vocabulary.py or the checks here): Alpha; a decay outside [0, 1].
"""
import numpy as np

from spikec.targets.lava.refusal import refuse

SJ_NOTE = "SpikingJelly fires on H >= theta: the integer comparison is v >= vth << 6 (SpikecLIF)"


def _base(get, beta, threshold, **kw) -> dict:
    c = beta.shape
    p = {"beta": beta, "alpha": np.ones(c), "bias": np.zeros(c), "threshold": threshold, "v_reset": np.zeros(c)}
    p.update(kw)
    return p


def _sj_params(get, node) -> dict:
    theta = get("threshold")
    r = get("v_reset") if "v_reset" in node.params else np.zeros_like(theta)
    k = 1.0 / get("tau") if "tau" in node.params else get("decay") if "decay" in node.params else None
    if k is None:   # IF: H = V + X
        beta, alpha = np.ones_like(theta), np.ones_like(theta)
    else:
        beta, alpha = 1.0 - k, (k if node.attrs["decay_input"] else np.ones_like(theta))
    return _base(get, beta, theta - r, alpha=alpha, reset="subtract" if "v_reset" not in node.params else "zero",
                 fire="ge", notes=[SJ_NOTE])


def _snntorch_reset(node, synaptic: bool) -> str:
    kind, delay = node.attrs["reset"], node.attrs["reset_delay"]
    if kind == "none":
        return "none"
    if kind == "zero":
        return "delayed_zero" if synaptic and delay else "zero"
    return "delayed_subtract" if delay else "snntorch_subtract"


def _recurrence(node, c: int) -> dict:
    """The float self-synapse of snnTorch's RLeaky / RSynaptic: ``{"rec_kind": "dense" | "conv", "rec_weight":
    [out, in] (N, N) or (C, C, kh, kw), "rec_padding", "rec_bias": (C,)}`` ({} without a recurrence). one_to_one
    ``spk * V`` is a diagonal: a Dense on a 1-D population, a 1x1 Conv on a (C, H, W) one."""
    kind, prm = node.attrs.get("recurrent", "none"), node.params
    if kind == "none":
        return {}
    ndim = len(node.type.shape)
    if ndim not in (1, 3):
        raise refuse(node, f"a recurrence on a population of shape {node.type.shape}: only (N,) (a Dense) and "
                           "(C, H, W) (a Conv) populations have a self-synapse here")
    bias = np.broadcast_to(np.asarray(prm.get("bias", 0.0), dtype=np.float64), (c,)).copy()
    if kind == "one_to_one":
        diag = np.diag(np.broadcast_to(np.asarray(prm["V"], dtype=np.float64), (c,)))
        w = diag if ndim == 1 else diag[:, :, None, None]
        return {"rec_kind": "dense" if ndim == 1 else "conv", "rec_weight": w, "rec_padding": [0, 0],
                "rec_bias": bias}
    w = np.asarray(prm["weight"], dtype=np.float64)
    return {"rec_kind": "dense" if kind == "linear" else "conv", "rec_weight": w,
            "rec_padding": list(node.attrs.get("padding", [0, 0])), "rec_bias": bias}


def _rleaky_params(get, node) -> dict:
    """RLeaky: ``b = beta mem + x + rec(spk_prev)`` resets as Synaptic's (the zero reset after the decay)."""
    p = _base(get, get("beta"), get("threshold"), reset=_snntorch_reset(node, True))
    p.update(_recurrence(node, p["beta"].shape[0]))
    return p


def _leaky_params(get, node) -> dict:
    if node.attrs.get("read") == "mem":   # the read alone, no reset (mapping.state_read): a leaky integrator
        return _base(get, get("beta"), np.zeros_like(get("beta")), reset="none", fire="never")
    return _base(get, get("beta"), get("threshold"), reset=_snntorch_reset(node, False))


def _synaptic_params(get, node) -> dict:
    p = _base(get, get("beta"), get("threshold"), reset=_snntorch_reset(node, True), u_keep=get("alpha"),
              current=True)
    p.update(_recurrence(node, p["beta"].shape[0]))   # RSynaptic: rec(spk_prev) joins the current
    return p


def _norse_params(get, node) -> dict:
    a_mem, v_leak = get("dt_tau_mem_inv"), get("v_leak")
    p = _base(get, 1.0 - a_mem, get("threshold") - v_leak, alpha=a_mem,
              reset="zero" if node.attrs["reset"] == "value" else "subtract", v_reset=get("v_reset") - v_leak,
              v_leak=v_leak)
    if node.attrs["current"]:
        p.update(u_keep=1.0 - get("dt_tau_syn_inv"), current=True)
    return p


def _norse_recurrent_params(get, node) -> dict:
    a_mem, v_leak = get("dt_tau_mem_inv"), get("v_leak")
    p = _base(get, 1.0 - a_mem, get("threshold") - v_leak, alpha=a_mem, reset="zero",
              v_reset=get("v_reset") - v_leak, v_leak=v_leak, u_keep=1.0 - get("dt_tau_syn_inv"), current=True)
    w_in = np.asarray(node.params["input_weights"], dtype=np.float64)
    p.update(rec_kind="dense", rec_weight=np.asarray(node.params["recurrent_weights"], dtype=np.float64),
             rec_padding=[0, 0], rec_bias=np.zeros(p["beta"].shape[0]),
             input_identity=w_in.shape[0] == w_in.shape[1] and np.array_equal(w_in, np.eye(w_in.shape[0])))
    return p


def _check_norse_recurrent(pop, p: dict) -> None:
    if not p["input_identity"]:
        raise refuse(pop.neuron, "its input_weights are inside the op: the Lava target maps them as a Dense of "
                                 "their own (placement.split_norse_input), which this graph did not go through")
    _check(pop, p)


def _check(pop, p: dict) -> None:
    if (p["threshold"] < 0).any():
        raise refuse(pop.neuron, "a threshold below the reset/rest level has no Loihi form (it would fire at rest)")
    for k in ("beta", "u_keep"):
        if k in p and ((p[k] < 0) | (p[k] > 1)).any():
            raise refuse(pop.neuron, f"a decay ({'1 - ' if k == 'beta' else ''}{k}) outside [0, 1] is not a "
                                     "12-bit Lava decay")


def _check_norse(pop, p: dict) -> None:
    if pop.neuron.attrs["reset"] == "subtract" and (p["v_leak"] != 0).any():
        raise refuse(pop.neuron, "a subtract reset with v_leak != 0: the state is shifted by v_leak, so the "
                                 "subtracted v_th is not the shifted threshold, and Lava's subtract removes the "
                                 "threshold")
    _check(pop, p)


def _li_params(get, node) -> dict:
    a_mem, v_leak = get("dt_tau_mem_inv"), get("v_leak")
    p = _base(get, 1.0 - a_mem, np.zeros_like(a_mem), alpha=a_mem, reset="none", fire="never", v_leak=v_leak)
    if node.attrs["current"]:
        p.update(u_keep=1.0 - get("dt_tau_syn_inv"), current=True)
    return p


def read_offset(node, p: dict) -> np.ndarray:
    """What the float state adds to the dequantized integer state (Norse's states are shifted by ``v_leak``)."""
    return p.get("v_leak", np.zeros_like(p["beta"]))


# the lowerings by form (``ops_table.TABLE`` says which op lowers through which; neurons.FORMS builds them)
FORMS = {
    "sj_lif": (_sj_params, _check),
    "snntorch_leaky": (_leaky_params, _check),
    "snntorch_synaptic": (_synaptic_params, _check),
    "snntorch_rleaky": (_rleaky_params, _check),
    "norse_lif": (_norse_params, _check_norse),
    "norse_lif_recurrent": (_norse_recurrent_params, _check_norse_recurrent),
    "norse_li": (_li_params, _check),
}
