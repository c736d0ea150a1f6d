"""Run a lowered network in Lava's fixed-point simulator, in a supervised process session.

Chunks of the batch run as separate networks when a batch-folded (block-diagonal) Dense would be too large.
"""
import json
import sys

import numpy as np

from spikec.ir.errors import IRError
from spikec.targets.lava.layout import unfold_data, unfold_state
from spikec.targets.lava.lower import POPULATION_TYPES, lava_steps

MAX_FOLDED_WEIGHTS = 3e7     # int entries of one batch-folded (block-diagonal) Dense
MAX_CONV_GROUPS = 127        # Lava 0.10's Conv model holds ``groups`` in an int8 Var: 128 wraps to -128 (no output)


def batch_chunk(net: dict, arrays: dict, batch: int) -> int:
    """Samples per Lava network: the folded Dense weights of a chunk stay below ``MAX_FOLDED_WEIGHTS``, and a
    Conv's folded groups (groups x samples) within ``MAX_CONV_GROUPS``."""
    worst = max((arrays[f"{p['name']}/weights"].size * (p.get("axon_delay", 0) + 1) for p in net["processes"]
                 if p["type"] in ("Dense", "DelayDense")), default=1)
    groups = max((int(p["groups"]) for p in net["processes"] if p["type"] == "Conv"), default=1)
    return int(max(1, min(batch, np.floor(np.sqrt(MAX_FOLDED_WEIGHTS / worst)), MAX_CONV_GROUPS // groups)))


def _run_once_more_if_lost(workdir, spec: dict) -> dict:
    """The network job; once more when Lava's runtime lost a process mid-run (``runner._watch``: a failure of
    Lava's multiprocessing runtime, not of the network), saying so; a second loss is raised."""
    import shutil
    from spikec.targets.lava import supervisor
    try:
        return supervisor.run("network", workdir, spec)
    except IRError as e:
        if e.where != supervisor.LOST:
            raise
        print(f"spikec lava target: {e.what}; running it once more", file=sys.stderr)
        for d in list(workdir.iterdir()):   # the first attempt's chunks, result and error files
            if d.name not in ("network.json", "params.npz", "inputs.npz", "errors"):
                shutil.rmtree(d) if d.is_dir() else d.unlink()
        for f in (workdir / "errors").glob("*") if (workdir / "errors").is_dir() else ():
            f.unlink()
        return supervisor.run("network", workdir, spec)


def run_lava(net: dict, arrays: dict, x: dict) -> dict:
    """Run the network on ``x`` (name -> ``[T, B, *ir]`` integers) in Loihi2SimCfg(select_tag="fixed_pt").

    Lava runs in a supervised process session (``supervisor.py``): an interrupt or a killed compiler
    leaves no Lava process, shared-memory segment or work directory behind.
    Returns ``{"outputs": name -> [steps, B, *ir], "states": (var, name) -> [B, *ir], "steps", timings}``.
    """
    from spikec.targets.lava import supervisor
    first = next(iter(x.values()))
    t, batch = first.shape[:2]
    steps = lava_steps(net, t)
    chunk = batch_chunk(net, arrays, batch)
    ir = {r["name"]: tuple(r["ir_shape"]) for r in net["recorded"]}
    ir.update({p["name"]: tuple(p["ir_shape"]) for p in net["processes"] if p["type"] in POPULATION_TYPES})
    outputs, states = {}, {}
    with supervisor.workdir("spikec-lava-") as workdir:
        (workdir / "network.json").write_text(json.dumps(net))
        with open(workdir / "params.npz", "wb") as f:
            np.savez(f, **arrays)
        with open(workdir / "inputs.npz", "wb") as f:
            np.savez(f, *[np.asarray(v) for v in x.values()])   # positional: any input name is safe
        r = _run_once_more_if_lost(workdir, {"steps": steps, "chunk": chunk, "inputs": list(x)})
        failed = sorted((workdir / "errors").iterdir())   # guarded ProcessModels' tracebacks (supervisor.ERRORS_ENV)
        if failed:
            raise IRError("a Lava process failed during the run:\n" + "\n".join(f.read_text() for f in failed),
                          where=f"Lava process {failed[0].name.split('.')[0]!r}",
                          remedy="this is a compiler bug: report it with the model")
        for c in r["chunks"]:
            for what, name, rel in c["files"]:
                data = np.load(workdir / rel, allow_pickle=False)
                if what == "spikes":
                    outputs.setdefault(name, []).append(unfold_data(data, c["batch"], ir[name]))
                else:
                    states.setdefault((what, name), []).append(unfold_state(data, c["batch"], ir[name]))
    return {"outputs": {k: np.concatenate(v, axis=1) for k, v in outputs.items()},
            "states": {k: np.concatenate(v, axis=0) for k, v in states.items()},
            "steps": steps, "batch_chunk": chunk, "chunks": -(-batch // chunk),
            "build_seconds": round(r["build_seconds"], 3), "sim_seconds": round(r["sim_seconds"], 3)}
