"""The TTFS network (``ttfs.py``) as Lava processes, run in ``Loihi2SimCfg(select_tag="fixed_pt")``.

Processes: a ``RingBuffer`` (the input spikes at their ticks, encoded on the host), per layer and source a
``Dense`` (8-bit mantissas, emitted as ``2 wq`` with ``weight_exp = e - 1`` for mixed signs, Lava dropping the
LSB of mixed-sign weights), and per layer a ``SpikecTTFS`` population (``ttfs_procs``). Recorders take every
layer's spikes at every Lava step. Samples run side by side: neurons sample-major, Dense weights
block-diagonal.

Latency: Lava step ``s`` (1-based) sends RingBuffer column ``s - 1``; every Dense delivers one step later.
So a layer's ``lag`` (tick ``k`` at Lava step ``k + lag + 1``) is ``1 + max(lag of its sources)``, the input's 0.
A source delayed by ``D`` ticks, or with a smaller lag, goes through spikec's ``Relay`` (a delay line of
``D + lag - 1 - lag_src`` steps; custom, CPU only) before its Dense.
"""
import time
from pathlib import Path

import numpy as np

from spikec.targets.lava.fixed_point import dense_weights, weight_range
from spikec.targets.lava.ttfs import TTFSNet

MAX_FOLDED_WEIGHTS = 3e7     # entries of one batch-folded (block-diagonal) Dense


def lags(net: TTFSNet) -> dict:
    lag = {net.input.name: 0}
    for layer in net.layers:
        lag[layer.name] = 1 + max(lag[s] for s in layer.sources)
    return lag


def lava_steps(net: TTFSNet) -> int:
    lag = lags(net)
    return max(l.k_max + lag[l.name] for l in net.layers) + 1


def batch_chunk(net: TTFSNet, batch: int) -> int:
    worst = max(w.size for l in net.layers for w in l.wq)
    return int(max(1, min(batch, np.floor(np.sqrt(MAX_FOLDED_WEIGHTS / worst)))))


def spec(net: TTFSNet) -> tuple[dict, dict]:
    """``(network, arrays)``: what the Lava job builds, as JSON and named int64 arrays."""
    lag, arrays, layers = lags(net), {}, []
    for layer in net.layers:
        dense = []
        for i, src in enumerate(layer.sources):
            wq = layer.wq[i]
            _, _, mode = weight_range(wq)
            emitted, wexp = dense_weights(wq.T, mode)           # Dense weights are (n_out, n_in)
            key = f"{layer.name}/w{i}"
            arrays[key] = emitted.astype(np.int64)
            dense.append({"source": src, "weights": key, "weight_exp": int(wexp + layer.weight_exp),
                          "sign_mode": mode, "relay": int(layer.delays[i] + lag[layer.name] - 1 - lag[src])})
        arrays[f"{layer.name}/vth"] = layer.vth
        layers.append({"name": layer.name, "size": layer.size, "dense": dense, "ramp": layer.ramp,
                       "k_min": layer.k_min, "k_max": layer.k_max, "lag": lag[layer.name]})
    return {"input": {"name": net.input.name, "size": net.input.size}, "layers": layers,
            "steps": lava_steps(net), "chunk_limit": MAX_FOLDED_WEIGHTS}, arrays


def raster(ticks: np.ndarray, steps: int) -> np.ndarray:
    """Input ticks ``[B, n]`` (-1 silent) as RingBuffer data ``[B*n, steps]`` (sample-major)."""
    b, n = ticks.shape
    data = np.zeros((b * n, steps), dtype=np.int64)
    flat = ticks.reshape(-1)
    on = np.flatnonzero(flat >= 0)
    data[on, flat[on]] = 1
    return data


def build(network: dict, arrays: dict, in_ticks: np.ndarray, workdir: Path):
    """Lava processes for one chunk of samples; returns (source process, recorder files by layer)."""
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.proc.dense.process import Dense
    from lava.proc.io.source import RingBuffer
    from spikec.targets.lava.procs.process import Recorder, Relay
    from spikec.targets.lava.ttfs_procs.process import SpikecTTFS

    b, steps = in_ticks.shape[0], network["steps"]
    src = RingBuffer(data=raster(in_ticks, steps))
    ports, files = {network["input"]["name"]: src.s_out}, {}
    for p in network["layers"]:
        n = p["size"]
        proc = SpikecTTFS(shape=(b * n,), vth=np.tile(arrays[p["name"] + "/vth"], b), ramp=p["ramp"],
                          k_min=p["k_min"], k_max=p["k_max"], lag=p["lag"], name=p["name"])
        for d in p["dense"]:
            w = np.kron(np.eye(b, dtype=np.int64), arrays[d["weights"]])
            syn = Dense(weights=w, weight_exp=d["weight_exp"], num_message_bits=0, name=f"{p['name']}/{d['source']}")
            if d["relay"]:   # a delayed (residual) source, or one from an earlier layer: an axonal delay line
                relay = Relay(shape=ports[d["source"]].shape, delay=d["relay"], name=f"{p['name']}/{d['source']}/relay")
                ports[d["source"]].connect(relay.s_in)
                relay.s_out.connect(syn.s_in)
            else:
                ports[d["source"]].connect(syn.s_in)
            syn.a_out.connect(proc.a_in)
        ports[p["name"]] = proc.s_out
        files[p["name"]] = workdir / f"{p['name'].replace('/', '_')}.spikes.npy"
        rec = Recorder(shape=(b * n,), steps=steps, path=files[p["name"]])
        proc.s_out.connect(rec.a_in)
    return src, files


def first_ticks(data: np.ndarray, b: int, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """Recorded spikes ``[b*n, steps]`` -> (first spike tick ``[b, n]``, -1 silent; spikes per neuron ``[b, n]``)."""
    spikes = data != 0
    count = spikes.sum(1)
    first = np.where(count > 0, spikes.argmax(1) - lag, -1)
    return first.reshape(b, -1), count.reshape(b, -1)


def job(path: Path, spec_: dict) -> dict:
    """The runner's ``ttfs`` job: the network on ``ticks.npy`` (input ticks ``[N, n]``), chunk by chunk."""
    import json
    from lava.magma.core.run_conditions import RunSteps
    from lava.magma.core.run_configs import Loihi2SimCfg

    network = json.loads((path / "network.json").read_text())
    with np.load(path / "params.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    ticks = np.load(path / "ticks.npy", allow_pickle=False)
    chunk, chunks, build_s, sim_s = spec_["chunk"], [], 0.0, 0.0
    for i, lo in enumerate(range(0, ticks.shape[0], chunk)):
        out = path / f"chunk{i}"
        out.mkdir()
        start = time.perf_counter()
        src, files = build(network, arrays, ticks[lo:lo + chunk], out)
        build_s += time.perf_counter() - start
        start = time.perf_counter()
        try:
            src.run(condition=RunSteps(num_steps=network["steps"]), run_cfg=Loihi2SimCfg(select_tag="fixed_pt"))
        finally:
            src.stop()
        sim_s += time.perf_counter() - start
        chunks.append({"batch": int(ticks[lo:lo + chunk].shape[0]),
                       "files": {k: str(p.relative_to(path)) for k, p in files.items()}})
        if any((path / "errors").iterdir()):
            break
    return {"chunks": chunks, "build_seconds": build_s, "sim_seconds": sim_s}


def run_lava(net: TTFSNet, in_ticks: np.ndarray, written: tuple | None = None) -> dict:
    """Run ``net`` (or the ``written`` ``(network, arrays)`` of its artifacts) on input ticks ``[N, n]`` in a
    supervised Lava session; per layer first ticks and spike counts."""
    import json
    from spikec.ir.errors import IRError
    from spikec.targets.lava import supervisor
    network, arrays = spec(net) if written is None else written
    lag = {p["name"]: p["lag"] for p in network["layers"]}
    firsts, counts = {}, {}
    with supervisor.workdir("spikec-ttfs-") as workdir:
        (workdir / "network.json").write_text(json.dumps(network))
        with open(workdir / "params.npz", "wb") as f:
            np.savez(f, **arrays)
        np.save(workdir / "ticks.npy", np.asarray(in_ticks, dtype=np.int64))
        r = supervisor.run("ttfs", workdir, {"chunk": batch_chunk(net, in_ticks.shape[0])})
        failed = sorted((workdir / "errors").iterdir())
        if failed:
            raise IRError("a Lava process failed during the TTFS run:\n" + "\n".join(f.read_text() for f in failed),
                          where=f"Lava process {failed[0].name.split('.')[0]!r}",
                          remedy="this is a compiler bug: report it with the model")
        for c in r["chunks"]:
            for name, rel in c["files"].items():
                first, count = first_ticks(np.load(workdir / rel, allow_pickle=False), c["batch"], lag[name])
                firsts.setdefault(name, []).append(first)
                counts.setdefault(name, []).append(count)
    return {"ticks": {k: np.concatenate(v) for k, v in firsts.items()},
            "spike_counts": {k: np.concatenate(v) for k, v in counts.items()},
            "steps": network["steps"], "chunk": batch_chunk(net, in_ticks.shape[0]),
            "build_seconds": round(r["build_seconds"], 3), "sim_seconds": round(r["sim_seconds"], 3)}
