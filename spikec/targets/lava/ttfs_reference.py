"""The integer reference of a TTFS network on Loihi (``ttfs.py``): bit-accurate, numpy, a closed form per layer.

Independent of the Lava ProcessModel (``ttfs_procs/models.py``), which steps tick by tick; comparing the two
checks both. Spike times are absolute ticks (``-1``: silent).

Input encoding (host, float64, as ``spikec.codings.ttfs.simulate``'s ``dt`` mode): ``t = t_ref - clip(gain x, lo, hi)``,
tick ``k_min + max(0, ceil((t - t_min)/dt - 1e-9))``, silent when that is ``>= k_max``.

A layer: ``q_j = k_min - (k_j + D)`` for a source spike arriving (after its delay ``D``) before ``k_min`` (else 0), ``U = q @ Wint`` (int64),
``m = max(0, ceil((vth - U) / R))``; it fires at ``k_min + m`` when ``m < k_max - k_min``.
Decoding (host): ``value = (t_ref - (t_min + m dt)) / scale``, a silent neuron ``(t_ref - t_max) / scale``.
"""
import numpy as np

from spikec.targets.lava.ttfs import InputLayer, TTFSNet


def encode(inp: InputLayer, x: np.ndarray, dt: float) -> np.ndarray:
    """Ticks ``[N, n]`` of the input layer for inputs ``x`` ``[T, B, ...]`` (``T*B = N`` inferences)."""
    x = np.asarray(x, dtype=np.float64)
    v = np.clip(x.reshape(-1, inp.size) * inp.gain, inp.lo, inp.hi)
    t = inp.t_ref - v
    m = np.maximum(np.ceil((t - inp.t_min) / dt - 1e-9), 0).astype(np.int64)
    return np.where(m < inp.k_max - inp.k_min, inp.k_min + m, -1)


def run(net: TTFSNet, x: np.ndarray) -> dict:
    """Every layer's spike ticks ``[N, n]`` (int64, -1 silent) and its voltage at ``k_min`` (``"<name>/U"``)."""
    ticks = {net.input.name: encode(net.input, x, net.dt)}
    for layer in net.layers:
        u = 0
        for i, src in enumerate(layer.sources):
            k = np.where(ticks[src] >= 0, ticks[src] + layer.delays[i], -1)   # arrival ticks
            q = np.where((k >= 0) & (k < layer.k_min), layer.k_min - k, 0)
            u = u + q @ layer.wint(i)
        u = np.asarray(u, dtype=np.int64)
        m = np.maximum(-((u - layer.vth[None, :]) // layer.ramp), 0)   # ceil((vth - U) / R), at least 0
        ticks[layer.name] = np.where(m < layer.k_max - layer.k_min, layer.k_min + m, -1)
        ticks[layer.name + "/U"] = u
    return ticks


def decode(net: TTFSNet, ticks: dict, shape_tb: tuple) -> dict:
    """Graph output name -> decoded values ``[T, B, *shape]`` (float64)."""
    out = {}
    for name, layer_name, t_ref, scale in net.outputs:
        layer = net.layer(layer_name)
        k = ticks[layer_name]
        t = np.where(k >= 0, layer.t_min + (k - layer.k_min) * net.dt, layer.t_max)
        out[name] = ((t_ref - t) / scale).reshape(*shape_tb, *layer.shape)
    return out


def counts(net: TTFSNet, ticks: dict) -> dict:
    """Spikes and synaptic operations per inference (one AC per input spike per non-zero fan-out)."""
    n = next(iter(ticks.values())).shape[0]
    per_layer, syn_ops = {}, 0.0
    spikes = float((ticks[net.input.name] >= 0).sum()) / n
    per_layer[net.input.name] = {"neurons": net.input.size, "spikes_per_inference": spikes}
    for layer in net.layers:
        s = float((ticks[layer.name] >= 0).sum()) / n
        ops = 0.0
        for i, src in enumerate(layer.sources):
            k = np.where(ticks[src] >= 0, ticks[src] + layer.delays[i], -1)
            fan = (layer.wq[i] != 0).sum(1)
            ops += float((((k >= 0) & (k < layer.k_min)).astype(np.int64) @ fan).sum()) / n
        per_layer[layer.name] = {"neurons": layer.size, "spikes_per_inference": s,
                                 "synaptic_ops_per_inference": ops}
        spikes += s
        syn_ops += ops
    return {"spikes_per_inference": spikes, "synaptic_ops_per_inference": syn_ops, "per_layer": per_layer,
            "samples": n}
