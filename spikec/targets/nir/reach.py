"""NIR forms of what framework users write that no single NIR node is: ``concat``, snnTorch's default ``Synaptic``,
Norse's ``LIFRecurrentCell`` and ``LICell``. Each is a composition of NIR primitives, exact in spikec's NIR
interpreter (the target proves it on the user's inputs), run in every consumer that reads it.

* ``concat`` along a vector's dim (or the channel dim of a ``(C, L)`` / ``(C, H, W)`` step): NIR has no concat node,
  but a node sums its inputs. Each part goes through a 0/1 selection ``Linear`` (a 1x1 ``Conv1d`` / ``Conv2d``
  for channels) that places it at its offset; the readers sum the parts. Exact: ``x * 1`` and ``+ 0`` round nothing.
* a leaky integrator ``y_t = x_t + d y_{t-1}`` that the consumers read (``leaky_cycle``): NIR's ``LI`` they do not,
  but an identity ``Affine`` summing ``x`` and a diagonal ``d`` of its own output is one, a cycle read one step
  late. Before the first step a cycle carries its source's value at rest, so ``x`` must rest at 0: a spike or graph
  input does, and a linear of one does once its bias comes from a clock (a LIF firing on every step) through a
  weight column (``_resting_input``); otherwise the ``LI`` form is written.
* snnTorch's ``Synaptic`` with its default subtract reset, ``reset_delay=True``, ``θ >= 0``, read as spikes:
  ``syn = alpha syn + x`` is that integrator (or an ``LI`` of gain 1), feeding the Leaky's CubaLIF reset cycle
  (``composed.snntorch_leaky``: the CubaLIF's current is ``mem = beta mem + syn - θ r``). One rounding differs as
  in the Leaky (``beta mem + (syn - θ)``); the checker compares every spike.
* Norse's ``LIFRecurrentCell`` read as spikes (``v_leak = 0``): ``Linear(input_weights)`` into the LIFCell's
  ``CubaLIF`` (``composed.norse_lif``) with ``Linear(recurrent_weights)`` from its spikes back into it, a cycle read
  one step late (Norse adds ``linear(z_prev, W_rec)`` to the current jump). NIR sums the two linears first where
  Norse adds them to the current one by one: another rounding, measured.
* Norse's ``LICell`` (a current, ``v_leak = 0``) read as ``v``: two such integrators (``i_t = x_t + (1 - a_syn)
  i_{t-1}``, ``v_t = a_mem i_t + (1 - a_mem) v_{t-1}``: Norse's step, rounded otherwise by an ulp), else NIR's
  ``CubaLI`` (the LIFCell's ``CubaLIF`` that never fires, ``forms.cuba`` with ``fire=False``).
"""
import nir
import numpy as np

from spikec.targets.nir import composed, forms
from spikec.targets.nir.export import LOWERINGS, REMEDIES, VARIANT_REASONS, _refuse
from spikec.targets.nir.export import NEVER
from spikec.targets.nir.reasons import LI_NORSE, LIF, LIF_RECURRENT_NORSE, LIF_SNNTORCH, SYNAPTIC_SNNTORCH

SYN_NOTE = ("snnTorch Synaptic (subtract reset, reset_delay=True) as its syn (an Affine cycle, or NIR LI) into the "
            "Leaky's CubaLIF (its current the Synaptic's mem, tau_mem = dt) + a -threshold feedback through an identity")
REC_NOTE = ("Norse LIFRecurrentCell as Linear(input_weights) into the LIFCell's CubaLIF + Linear(recurrent_weights) "
            "from its spikes back into it (read one step late)")
LI_CYCLE_NOTE = ("Norse LICell as two leaky integrators of Affine nodes and cycles: i_t = x_t + (1 - a_syn) i_{t-1}, "
                 "v_t = a_mem i_t + (1 - a_mem) v_{t-1} (read one step late)")
LI_NOTE = "Norse LICell as CubaLI: its current jumps by the input then decays (gain 1), its membrane v + a_mem (i - v)"


def _selection(ex, node, src: str, offset: int, total: int) -> str:
    """``src`` placed at ``offset`` along the concat's dim of ``total``: a 0/1 Linear or a 1x1 conv."""
    shape = ex.graph.node(src).type.shape
    n = shape[node.attrs["axis"]]
    place = np.zeros((total, n))
    place[offset + np.arange(n), np.arange(n)] = 1.0
    base = f"{node.name}.part"
    if len(shape) == 1:
        return ex.add(base, nir.Linear(weight=place), (src,))
    if len(shape) == 2:
        conv = nir.Conv1d(input_shape=int(shape[1]), weight=place[:, :, None], stride=1, padding=0, dilation=1,
                          groups=1, bias=np.zeros(total))
        return ex.add(base, conv, (src,))
    return ex.conv(node, base, (src,), shape, place[:, :, None, None], np.zeros(total), 1, 0, 1, 1)


# -- a leaky integrator of stateless nodes: what every consumer reads --------------------------------------------------
def _diag(ex, node, base: str, src: str, a) -> str:
    """``a * src`` per neuron (a diagonal Affine of the NIR node ``src``)."""
    tmp = f"{node.name}.{base}.src"
    ex.sources[tmp] = [src]
    name = ex.channel_affine(node, f"{node.name}.{base}", (tmp,), a, 0.0, node.type.shape)
    del ex.sources[tmp]
    return name


def _clock(ex, node, feed: str, size: int) -> str:
    """A NIR LIF that fires on every step from the first (``0 * feed + 4``, ``beta = 0.5``, reset to 0, threshold
    0.5: every step starts at 0, so every reader's charge is the input, exactly; SpikingJelly wants ``tau > dt``):
    multiplied by a weight column it is a constant input whose value at rest, before the first step, is 0."""
    if getattr(ex, "clock", None):
        return ex.clock
    one = np.ones(1)
    start = ex.add("clock.in", nir.Affine(weight=np.zeros((1, size)), bias=4 * one))
    ex.edges.append((feed, start))
    lif, ok = forms.lif(ex.form, 0.5 * one, one, np.zeros(1), 0.5 * one, np.zeros(1))
    ex.exact_params &= ok
    ex.clock = ex.add("clock", lif)
    ex.edges.append((start, ex.clock))
    return ex.clock


def _resting_input(ex, node, readers=None) -> list[str] | None:
    """The NIR sources of ``node``'s input with a value 0 at rest (what a cycle reads before the first step), or None.
    A spike or graph input rests at 0; a linear of one adds its bias at rest, so its bias is moved onto a clock
    neuron (``_clock``) when the neuron is the linear's only reader."""
    src = ex.graph.node(node.inputs[0])
    rests = lambda n: n.op == "input" or n.type.is_spike
    if rests(src):
        return list(ex.sources[src.name])
    if src.name in ex.__dict__.get("rested", ()):   # already moved onto the clock for another of its readers
        return list(ex.sources[src.name])
    bias = np.asarray(src.params.get("bias", 0.0), dtype=np.float64)
    if src.op != "linear" or not rests(ex.graph.node(src.inputs[0])) or len(ex.sources[src.name]) != 1:
        return None
    (fc,) = ex.sources[src.name]
    if not bias.any():
        return [fc]
    if not set(ex.users.get(src.name, ())) <= set(readers or (node.name,)):
        return None
    ex.nodes[fc].bias = np.zeros_like(ex.nodes[fc].bias)   # the same sum, its bias from the clock instead
    # fed by the linear itself, before the linear feeds the cycle: nirtorch's preorder then runs the clock first
    clock = _clock(ex, node, fc, src.type.shape[0])
    column = ex.add(f"{src.name}.bias", nir.Linear(weight=bias.reshape(-1, 1)))
    ex.edges.append((clock, column))
    ex.carriers.pop(src.name, None)   # its value is now the sum of the two
    ex.sources[src.name] = [fc, column]
    ex.__dict__.setdefault("rested", set()).add(src.name)
    ex.notes.append(f"{src.name}: its bias from a clock neuron (it feeds a leaky integrator cycle, which must rest at 0)")
    return [fc, column]


def leaky_cycle(ex, node, base: str, sources: list[str], decay, gain=None) -> str:
    """``y_t = (gain *) x_t + decay * y_{t-1}`` of stateless nodes: an identity summing ``sources`` (each scaled by
    ``gain``) and a diagonal ``decay`` of its own output, a cycle read one step late (0 before the first step: the
    sources rest at 0). snnTorch, Norse and SpikingJelly read Affine cycles; NIR's LI they do not."""
    name = ex.add(f"{node.name}.{base}", nir.Affine(weight=np.eye(node.type.shape[0]), bias=np.zeros(node.type.shape[0])))
    for src in sources:
        ex.edges.append((_diag(ex, node, f"{base}_in", src, gain) if gain is not None else src, name))
    fb = _diag(ex, node, f"{base}_decay", name, decay)
    ex.edges.append((fb, name))
    return name


def concat(ex, node) -> None:
    axis, shape = node.attrs["axis"], node.type.shape
    if axis != 0 or len(shape) > 3:
        _refuse(node, f"a concat along dim {axis} of a {shape} step: NIR has no concat node, and only a vector's "
                "dim or the channel dim (a 0/1 Linear or 1x1 conv per part, summed by the reader) has a NIR form",
                "concatenate vectors or channels, or flatten before the concat")
    parts, offset = [], 0
    for src in node.inputs:
        parts.append(_selection(ex, node, src, offset, shape[0]))
        offset += ex.graph.node(src).type.shape[0]
    ex.sources[node.name] = parts
    ex.notes.append(f"{node.name}: concat as a 0/1 selection per part, summed by its reader")


_plain_synaptic = LOWERINGS[SYNAPTIC_SNNTORCH]


def _takes_cycle(ex, n) -> bool:
    """``n`` reads its input through a ``leaky_cycle`` (``synaptic``'s spikes, ``membrane``): the readers among which a
    linear's bias may move onto the clock (``_resting_input``), since every one of them then reads the moved sum."""
    if len(n.type.shape) != 1:
        return False
    p = {k: ex.per_neuron(n, np.asarray(v, dtype=np.float64)) for k, v in n.params.items() if k in (
        "alpha", "beta", "threshold", "bias")}
    a = n.attrs
    if n.op == SYNAPTIC_SNNTORCH:
        return bool(a["reset"] == "subtract" and a["reset_delay"] and a.get("recurrent", "none") == "none"
                    and a.get("read", "spikes") == "spikes" and (p["threshold"] >= 0).all()
                    and ((p["beta"] >= 0) & (p["beta"] < 1)).all() and ((p["alpha"] >= 0) & (p["alpha"] <= 1)).all())
    return bool(n.op == LIF and a.get("output") == "membrane" and "nir_dt" not in a
                and (p["threshold"] >= NEVER).all() and (p["alpha"] == 1).all() and (p["bias"] == 0).all()
                and ((p["beta"] >= 0) & (p["beta"] <= 1)).all())


def _cycle_readers(ex, node) -> set[str]:
    return {u for u in ex.users.get(node.inputs[0], ()) if _takes_cycle(ex, ex.graph.node(u))}


MEMBRANE_NOTE = ("a never-firing neuron read as its membrane (snnTorch Synaptic's syn): y_t = x_t + beta y_{t-1}, an "
                 "identity Affine and a diagonal cycle, which the consumers read (NIR LI they do not)")
_plain_lif = LOWERINGS[LIF]


def membrane(ex, node) -> None:
    """``lif`` never firing, read as its membrane, ``U = beta H + X`` (no bias, gain 1; Synaptic's ``syn``, not one
    read from NIR): a ``leaky_cycle`` when its input rests at 0 on a vector step; else the plain lowering (LI)."""
    if _takes_cycle(ex, node):
        sources = _resting_input(ex, node, _cycle_readers(ex, node))
        if sources is not None:
            beta = ex.per_neuron(node, np.asarray(node.params["beta"], dtype=np.float64))
            ex.single(node, leaky_cycle(ex, node, "mem", sources, beta))
            return ex.notes.append(f"{node.name}: {MEMBRANE_NOTE} (read one step late)")
    return _plain_lif(ex, node)


def synaptic(ex, node) -> None:
    a = node.attrs
    if not (a["reset"] == "subtract" and a["reset_delay"] and a.get("recurrent", "none") == "none"
            and a.get("read", "spikes") == "spikes"):
        return _plain_synaptic(ex, node)
    raw = {k: np.asarray(node.params[k], dtype=np.float64) for k in ("alpha", "beta", "threshold")}
    alpha, beta, theta = (ex.per_neuron(node, raw[k]) for k in ("alpha", "beta", "threshold"))
    if (theta < 0).any() or not (((beta >= 0) & (beta < 1)).all() and ((alpha >= 0) & (alpha <= 1)).all()):
        _refuse(node, "a negative threshold, or a decay outside [0, 1) (beta) / [0, 1] (alpha): "
                + VARIANT_REASONS[SYNAPTIC_SNNTORCH], REMEDIES[SYNAPTIC_SNNTORCH])
    sources = _resting_input(ex, node, _cycle_readers(ex, node)) if len(node.type.shape) == 1 else None
    if sources is not None:   # syn_t = x_t + alpha syn_{t-1}: Affine nodes and a cycle, read by the consumers
        li = leaky_cycle(ex, node, "syn", sources, alpha)
    else:
        syn, ok = composed._integrator(ex.form, alpha)
        if syn is None:
            _refuse(node, "alpha = 1 on some channels and < 1 on others: neither NIR LI nor I covers both",
                    REMEDIES[SYNAPTIC_SNNTORCH])
        ex.exact_params &= ok and ex.form.scheme == "snntorch"
        li = ex.add(f"{node.name}.syn", syn, node.inputs)
    zeros, ones = np.zeros_like(beta), np.ones_like(beta)
    mem = {"beta": zeros, "alpha": ones, "bias": zeros, "theta": np.nextafter(theta, np.inf), "v_reset": zeros}
    cuba, ok = forms.cuba(ex.form, {"beta": beta, "alpha": ones}, mem, True)
    ex.exact_params &= ok
    name = ex.add(node.name, cuba)
    ex.edges.append((li, name))
    sub_raw = np.float32(raw["threshold"]).astype(np.float64) if raw["threshold"].ndim == 0 else raw["threshold"]
    sub = ex.per_neuron(node, sub_raw).reshape(node.type.shape[0], -1)[:, 0]
    composed._reset_cycle(ex, node, name, name, sub, True)
    ex.single(node, name)
    ex.notes.append(f"{node.name}: {SYN_NOTE} (read one step late)")


def _norse_params(ex, node, skip=()) -> dict:
    return {k: ex.per_neuron(node, np.asarray(v, dtype=np.float64)) for k, v in node.params.items() if k not in skip}


def lif_recurrent_norse(ex, node) -> None:
    weights = ("input_weights", "recurrent_weights")
    p = _norse_params(ex, node, weights)
    why = "a v or i read-out, or v_leak != 0" if node.attrs.get("read", "spikes") != "spikes" or \
        (p["v_leak"] != 0).any() else "dt * tau_mem_inv outside (0, 1]" \
        if not ((p["dt_tau_mem_inv"] > 0) & (p["dt_tau_mem_inv"] <= 1)).all() else None
    if why:
        _refuse(node, f"{why}: Norse's LIFRecurrentCell is exported read as spikes, resting at v_leak = 0 (NIR's "
                "CubaLIF outputs spikes only and starts at 0)", "compile with --target onnx, which lowers "
                "lif_recurrent_norse exactly (spikes, v and i)")
    w_in, w_rec = (np.asarray(node.params[k], dtype=np.float64) for k in weights)
    lin = ex.add(f"{node.name}.w_in", nir.Linear(weight=w_in), node.inputs)
    a_mem, ones, zeros = p["dt_tau_mem_inv"], np.ones_like(p["v_leak"]), np.zeros_like(p["v_leak"])
    mem = {"beta": 1 - a_mem, "alpha": a_mem, "bias": zeros, "theta": np.nextafter(p["threshold"], np.inf),
           "v_reset": p["v_reset"]}
    cuba, ok = forms.cuba(ex.form, {"beta": 1 - p["dt_tau_syn_inv"], "alpha": ones}, mem, True)
    ex.exact_params &= ok
    name = ex.add(node.name, cuba)
    rec = ex.add(f"{node.name}.w_rec", nir.Linear(weight=w_rec))
    ex.edges += [(lin, name), (name, rec), (rec, name)]
    ex.single(node, name)
    ex.notes.append(f"{node.name}: {REC_NOTE}")


def li_norse(ex, node) -> None:
    p = _norse_params(ex, node)
    a = node.attrs
    if not a.get("current") or a.get("read", "v") != "v" or (p["v_leak"] != 0).any() or \
            not ((p["dt_tau_mem_inv"] > 0) & (p["dt_tau_mem_inv"] <= 1)).all():
        _refuse(node, VARIANT_REASONS[LI_NORSE], REMEDIES[LI_NORSE])
    a_mem, ones, zeros = p["dt_tau_mem_inv"], np.ones_like(p["v_leak"]), np.zeros_like(p["v_leak"])
    sources = _resting_input(ex, node) if len(node.type.shape) == 1 else None
    if sources is not None:   # i_t = x_t + (1 - a_syn) i_{t-1}; v_t = a_mem i_t + (1 - a_mem) v_{t-1}: Affine cycles
        i = leaky_cycle(ex, node, "i", sources, 1 - p["dt_tau_syn_inv"])
        ex.single(node, leaky_cycle(ex, node, "v", [i], 1 - a_mem, a_mem))
        return ex.notes.append(f"{node.name}: {LI_CYCLE_NOTE}")
    mem = {"beta": 1 - a_mem, "alpha": a_mem, "bias": zeros, "theta": zeros, "v_reset": zeros}
    state, ok = forms.cuba(ex.form, {"beta": 1 - p["dt_tau_syn_inv"], "alpha": ones}, mem, False)
    ex.exact_params &= ok
    ex.single(node, ex.add(node.name, state, node.inputs))
    ex.notes.append(f"{node.name}: {LI_NOTE}")


MEM_NOTE = ("snnTorch Leaky (subtract reset, reset_delay=True) read as mem: its mem an Affine cycle "
            "(x + beta mem - threshold spk_prev), its spikes a beta = 0 LIF of it firing on > threshold")
_plain_leaky = LOWERINGS[LIF_SNNTORCH]


def leaky(ex, node) -> None:
    """The default Leaky read as ``mem`` (a vector step, ``0 <= beta <= 1``): ``mem_t = (beta mem_{t-1} + x_t) -
    θ spk_{t-1}`` is a ``leaky_cycle`` with the ``-θ`` feedback from its spikes, and ``spk = [mem > θ]`` a LIF with
    ``beta = 0`` (its input each step, exactly): Affine cycles and a LIF, which the consumers read; NIR sums the
    parts in snnTorch's order. Otherwise ``composed.snntorch_leaky`` (the CubaLIF cycle, or LI + Threshold)."""
    a, key = node.attrs, composed._key(node)
    group = [n for n in ex.graph.nodes if n.op == LIF_SNNTORCH and composed._key(n) == key]
    known = ex.neurons.get(key, {})
    if "cycle" in known:
        return ex.single(node, known[a.get("read", "spikes")])
    if known or not (a["reset"] == "subtract" and a["reset_delay"] and len(node.type.shape) == 1
                     and any(n.attrs.get("read", "spikes") == "mem" for n in group)):
        return _plain_leaky(ex, node)
    raw = {k: np.asarray(node.params[k], dtype=np.float64) for k in ("beta", "threshold")}
    beta, theta = (ex.per_neuron(node, raw[k]) for k in ("beta", "threshold"))
    if not ((beta >= 0) & (beta <= 1)).all():
        return _plain_leaky(ex, node)
    sources = _resting_input(ex, node, {n.name for n in group})
    if sources is None:
        return _plain_leaky(ex, node)
    mem = leaky_cycle(ex, node, "mem", sources, beta)
    zeros, ones = np.zeros_like(beta), np.ones_like(beta)
    lif, ok = forms.lif(ex.form, zeros, ones, zeros, np.nextafter(theta, np.inf), zeros)
    ex.exact_params &= ok
    spikes = ex.add(f"{node.name}.spikes", lif)
    ex.edges.append((mem, spikes))
    sub_raw = np.float32(raw["threshold"]).astype(np.float64) if raw["threshold"].ndim == 0 else raw["threshold"]
    composed._reset_cycle(ex, node, mem, spikes, ex.per_neuron(node, sub_raw), False)
    ex.neurons[key] = {"cycle": True, "mem": mem, "spikes": spikes}
    ex.notes.append(f"{node.name}: {MEM_NOTE} (read one step late)")
    ex.single(node, ex.neurons[key][a.get("read", "spikes")])


LOWERINGS.update({LIF: membrane, LIF_SNNTORCH: leaky, "concat": concat, SYNAPTIC_SNNTORCH: synaptic, LIF_RECURRENT_NORSE: lif_recurrent_norse,
                  LI_NORSE: li_norse})
