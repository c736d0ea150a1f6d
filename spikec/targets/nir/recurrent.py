"""snnTorch's ``RLeaky`` (op ``rleaky_snntorch``) in NIR: the Leaky's CubaLIF reset cycle plus its recurrence.

``RLeaky`` with its default subtract reset, ``reset_delay=True``, read as spikes, steps (``snntorch_neurons``)::

    mem = (beta * mem + x + rec(spk_prev)) - spk_prev * θ;   spk = [mem > θ]

``rec`` is ``F.linear(spk, W, b)`` (``all_to_all``) or ``spk * V`` (``one_to_one``); ``spk_prev`` is 0 at the first
step, so ``rec`` adds its bias ``b`` from the first step. Written as (``composed.snntorch_leaky``'s form):

* ``x`` (through an identity ``Affine`` carrying ``b``, when there is a bias: a cycle is read as 0 at the first
  step by nirtorch, so the bias is moved out of the cycle onto the input, where it is added at every step) into a
  ``CubaLIF`` whose current is the RLeaky's ``mem`` (``1 - dt/tau_syn == beta``, ``tau_mem = dt``: it fires on
  ``current > θ`` and its zero reset is forgotten by the next step);
* the ``-θ`` feedback through an identity back into it (the Leaky's reset cycle), and the recurrence ``W`` as a
  ``Linear`` (``V`` as a diagonal ``Affine``, or a depthwise 1x1 ``Conv2d`` on a ``(C, H, W)`` step) through an
  identity back into it: three-node loops, because snnTorch's importer turns a two-node LIF/CubaLIF <->
  Affine/Linear loop into a nested graph nirtorch cannot build (``consumers.NESTED``) and runs it as a zero-reset
  ``RLeaky`` besides.

A 0-dim ``θ`` or ``V`` multiplies snnTorch's float32 spikes in float32: the file holds ``float32(θ)`` and
``float32(V)``. Roundings differ from snnTorch (a NIR node sums its inputs first: ``beta mem + (x + b + W s - θ s)``);
the checker compares every spike on the user's inputs, in spikec's interpreter and in each consumer.
"""
import nir
import numpy as np

from spikec.targets.nir import composed
from spikec.targets.nir.export import LOWERINGS, _refuse
from spikec.targets.nir.reasons import REMEDIES, RLEAKY_SNNTORCH, VARIANT_REASONS

NOTE = ("snnTorch RLeaky (subtract reset, reset_delay=True) as CubaLIF (its current the RLeaky's mem, tau_mem = dt) "
        "+ a -threshold feedback and its recurrence, each through an identity back into it (read one step late)")


def _as_used(raw: np.ndarray) -> np.ndarray:
    """A 0-dim parameter as snnTorch's float32 spikes multiply it: rounded to float32."""
    return np.float32(raw).astype(np.float64) if raw.ndim == 0 else raw


def _pass(ex, node, base: str, src: str) -> str:
    """``src`` through an identity of the step's kind (diagonal Affine, depthwise 1x1 conv)."""
    tmp = f"{node.name}.{base}_src"
    ex.sources[tmp] = [src]
    name = ex.channel_affine(node, f"{node.name}.{base}", (tmp,), 1.0, 0.0, node.type.shape)
    del ex.sources[tmp]
    return name


def _bias(node) -> np.ndarray | None:
    """The recurrence's bias, None when it has none (or an all-zero one)."""
    b = node.params.get("bias")
    return None if b is None or not np.asarray(b).any() else np.asarray(b, dtype=np.float64)


def _recurrence(ex, node, spikes: str) -> str:
    """The recurrence from ``spikes``, without its bias."""
    p, shape = node.params, node.type.shape
    if node.attrs["recurrent"] == "linear":
        rec = ex.add(f"{node.name}.w_rec", nir.Linear(weight=np.asarray(p["weight"], dtype=np.float64)))
        ex.edges.append((spikes, rec))
        return rec
    v = ex.per_neuron(node, _as_used(np.asarray(p["V"], dtype=np.float64))).reshape(shape[0], -1)
    tmp = f"{node.name}.v_src"
    ex.sources[tmp] = [spikes]
    rec = ex.channel_affine(node, f"{node.name}.v_rec", (tmp,), v[:, 0], 0.0, shape)
    del ex.sources[tmp]
    return rec


def rleaky(ex, node) -> None:
    """The ``rleaky_snntorch`` lowering: the default RLeaky (subtract, ``reset_delay=True``, spikes, ``0 <= beta <=
    1``, ``θ >= 0``, a linear or one-to-one recurrence) as the CubaLIF cycles; the others are refused by name."""
    a, shape = node.attrs, node.type.shape
    raw = {k: np.asarray(node.params[k], dtype=np.float64) for k in ("beta", "threshold")}
    beta, theta = (ex.per_neuron(node, raw[k]) for k in ("beta", "threshold"))
    integrate = bool((beta == 1).all())
    why = [w for w, bad in (
        (f"reset {a['reset']!r}", a["reset"] != "subtract"), ("reset_delay=False", not a["reset_delay"]),
        (f"read {a.get('read')!r}", a.get("read", "spikes") != "spikes"),
        (f"a {a['recurrent']} recurrence", a["recurrent"] not in ("linear", "one_to_one")),
        ("a negative threshold", (theta < 0).any()),
        ("beta = 1 on some neurons and < 1 on others", not integrate and not ((beta >= 0) & (beta < 1)).all()),
        (f"a per-neuron value within a channel of a {shape} step", len(shape) not in (1, 3) or not _per_channel(
            ex, node))) if bad]
    if why:
        _refuse(node, f"{'; '.join(why)}: " + VARIANT_REASONS[RLEAKY_SNNTORCH], REMEDIES[RLEAKY_SNNTORCH])
    cuba, ok = composed.membrane_cuba(ex, beta, np.ones_like(beta), np.nextafter(theta, np.inf))
    ex.exact_params &= ok
    bias = _bias(node)
    if bias is None:
        name = ex.add(node.name, cuba, node.inputs)
    else:   # x + b (an identity Affine: exact), outside the cycle
        into = ex.add(f"{node.name}.rec_bias", nir.Affine(weight=np.eye(shape[0]), bias=bias), node.inputs)
        name = ex.add(node.name, cuba)
        ex.edges.append((into, name))
    ex.edges.append((_pass(ex, node, "rec_pass", _recurrence(ex, node, name)), name))
    sub = ex.per_neuron(node, _as_used(raw["threshold"])).reshape(shape[0], -1)[:, 0]
    composed._reset_cycle(ex, node, name, name, sub, True)
    ex.single(node, name)
    ex.notes.append(f"{node.name}: {NOTE}" + ("; the recurrence's bias on the input path" if bias is not None else ""))


def _per_channel(ex, node) -> bool:
    """Every per-neuron parameter is one value per channel (a (C, H, W) step's feedbacks are per channel)."""
    if len(node.type.shape) == 1:
        return True
    if node.attrs["recurrent"] != "one_to_one":
        return False
    for k in ("beta", "threshold", "V"):
        v = ex.per_neuron(node, np.asarray(node.params[k], dtype=np.float64)).reshape(node.type.shape[0], -1)
        if not (v == v[:, :1]).all():
            return False
    return True


LOWERINGS[RLEAKY_SNNTORCH] = rleaky
