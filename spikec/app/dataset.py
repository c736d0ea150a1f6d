"""Dataset-wide verification, the per-shard part: read one shard of a data set, compare source and deployed graph
sample by sample, and merge shard results (``spikec verify OUTDIR --inputs DATA --workers N``; the runners are in
``spikec.app.dataset_run``).

**Layout.** ``DATA`` is an ``.npz`` (key ``input``) or an ``.npy``, laid out ``[T, B, *input_shape]``, or, for a
loop model that takes one static input per sample, ``[B, *input_shape]`` (the layout is told from the deployed
graph's per-step input shape). Samples are axis B.

**Bounded memory.** Nothing reads the whole array: a shard is streamed out of the file (compressed or not) step by
step, keeping only its own samples (a shard of a compressed ``.npz`` still decompresses the file once). A worker
holds its shard in the file's dtype and one chunk of ``CHUNK`` samples in float64 with its traces.

**Shard-independent results.** Samples are compared in fixed global chunks (samples ``[k*CHUNK, (k+1)*CHUNK)``)
and shards are runs of whole chunks, so every sample is computed in the same batch whatever the number of
workers, and the merged counts of N workers are those of one. Real values are compared with the checker's rule
(``REL_TOL`` relative to the largest magnitude) taken per sample: each sample is judged as if it were verified
alone, not relative to whatever else shares its batch.
"""
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spikec.app import files
from spikec.core.checker import REL_TOL, per_step_sum
from spikec.ir.errors import BadInput

CHUNK = 64   # samples compared in one batch
WORST = 5    # mismatches kept per node, smallest firing margin first
SUMMED = ("spikes_compared", "values_compared")  # a target summary's counts that add up over chunks
REMEDY = "save it with np.savez(path, input=x): x laid out [T, B, *input_shape] ([B, *input_shape] for a loop " \
         "model with a static input)"


@dataclass(frozen=True)
class Dataset:
    path: str
    shape: tuple
    dtype: str
    fortran: bool
    axis: int  # the sample axis: 1 for [T, B, ...], 0 for a loop model's static [B, ...]

    @property
    def samples(self) -> int:
        return int(self.shape[self.axis])

    @property
    def layout(self) -> str:
        return "[T, B, ...]" if self.axis == 1 else "[B, ...] (one static input per sample)"


class _Member:
    """The ``input`` array of an ``.npz`` or the array of an ``.npy``, opened as a stream past its header."""

    def __init__(self, path: str):
        self.path, self.zip, self.file, self.raw = path, None, None, None
        try:  # a regular file: a FIFO or a device is refused, not waited on or read forever
            self.raw = files.open_regular(path, "inputs file", remedy="give --inputs an .npz (key 'input') or an .npy")
            if str(path).endswith(".npy"):
                self.file = self.raw
            else:
                self.zip = zipfile.ZipFile(self.raw)
                if "input.npy" not in self.zip.namelist():
                    keys = [n.removesuffix(".npy") for n in self.zip.namelist()]
                    raise BadInput(f"inputs file {str(path)!r} has no key 'input' (keys: {keys})", remedy=REMEDY)
                self.file = self.zip.open("input.npy")
            version = np.lib.format.read_magic(self.file)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            self.shape, self.fortran, self.dtype = read(self.file)
        except BadInput:
            self.close()
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            self.close()
            raise BadInput(f"cannot read inputs file {str(path)!r}: {type(e).__name__}: {e}",
                           remedy="give an .npz written by np.savez (key 'input') or an .npy written by np.save") from e

    def read(self, n: int) -> bytes:
        data = self.file.read(n)
        if len(data) != n:
            raise BadInput(f"inputs file {str(self.path)!r} is truncated", remedy="write it again with np.savez")
        return data

    def skip(self, n: int) -> None:
        if self.zip is None:
            self.file.seek(n, 1)
            return
        while n > 0:  # a zip member streams: read past what is skipped, 1 MiB at a time
            n -= len(self.read(min(n, 1 << 20)))

    def close(self) -> None:
        for f in (self.file, self.zip, self.raw):
            if f is not None:
                f.close()


def open_dataset(path, input_shape) -> Dataset:
    """The data set's header, checked against the deployed graph's per-step ``input_shape``; no data is read."""
    p = Path(path)
    if not str(path).strip() or not p.is_file():
        raise BadInput(f"inputs file {str(path)!r} {'is not a file' if p.exists() else 'does not exist'}",
                       remedy="give --inputs an .npz (key 'input') or an .npy")
    member = _Member(str(p))
    member.close()
    shape, dtype, want = tuple(int(d) for d in member.shape), np.dtype(member.dtype), tuple(input_shape)
    if dtype.kind not in "fiub":
        raise BadInput(f"array 'input' of {str(p)!r} has dtype {dtype}, not numbers", remedy=REMEDY)
    if len(shape) == len(want) + 2 and shape[2:] == want:
        axis = 1
    elif len(shape) == len(want) + 1 and shape[1:] == want:
        axis = 0
    else:
        raise BadInput(f"array 'input' of {str(p)!r} has shape {shape}: its per-step shape is not the graph's "
                       f"input shape {want}", remedy=f"lay the data set out as [T, B, {', '.join(map(str, want))}] "
                       f"(or [B, {', '.join(map(str, want))}] for a loop model with a static input)")
    if 0 in shape:
        raise BadInput(f"array 'input' of {str(p)!r} is empty: shape {shape}", remedy=REMEDY)
    return Dataset(str(p), shape, dtype.str, bool(member.fortran), axis)


def read_shard(ds: Dataset, lo: int, hi: int) -> np.ndarray:
    """Samples ``[lo, hi)`` along the sample axis, streamed out of the file: only they are kept in memory."""
    member = _Member(ds.path)
    try:
        dtype = np.dtype(member.dtype)
        if tuple(member.shape) != ds.shape or dtype.str != ds.dtype:
            raise BadInput(f"inputs file {ds.path!r} changed while it was being verified", remedy="verify again")
        if ds.fortran:  # column-major: the samples are not contiguous runs; read it whole (np.save of x.T, rare)
            whole = np.frombuffer(member.read(int(np.prod(ds.shape)) * dtype.itemsize), dtype).reshape(ds.shape,
                                                                                                      order="F")
            return np.ascontiguousarray(np.take(whole, range(lo, hi), axis=ds.axis))
        per_sample = int(np.prod(ds.shape[ds.axis + 1:], dtype=np.int64)) * dtype.itemsize
        rows = 1 if ds.axis == 0 else ds.shape[0]
        out = np.empty((rows, (hi - lo) * per_sample // dtype.itemsize), dtype)
        for t in range(rows):  # each step t holds [B, ...]: skip the samples before lo, keep [lo, hi), skip the rest
            member.skip(lo * per_sample)
            out[t] = np.frombuffer(member.read((hi - lo) * per_sample), dtype)
            member.skip((ds.samples - hi) * per_sample)
        shape = (hi - lo, *ds.shape[1:]) if ds.axis == 0 else (ds.shape[0], hi - lo, *ds.shape[2:])
        return out.reshape(shape)
    finally:
        member.close()


def chunks(lo: int, hi: int, size: int = CHUNK):
    """The global chunks ``[a, b)`` covering ``[lo, hi)`` (``lo`` a multiple of ``size``)."""
    return [(a, min(a + size, hi)) for a in range(lo, hi, size)]


def plan_shards(samples: int, shards: int, size: int = CHUNK) -> list[tuple[int, int]]:
    """``shards`` runs of whole chunks, as even as chunks allow (fewer when there are fewer chunks)."""
    n = -(-samples // size)
    shards = max(1, min(shards, n))
    bounds = [i * n // shards for i in range(shards + 1)]
    return [(bounds[i] * size, min(bounds[i + 1] * size, samples)) for i in range(shards)]


def _mismatch_mask(expected, got, spike: bool):
    """``(bad, max_rel_diff)`` over ``[T, B, ...]``: the checker's rule, with the real-value scale per sample."""
    e, g = np.asarray(expected, dtype=np.float64), np.asarray(got, dtype=np.float64)
    if spike:
        return e != g, 0.0
    finite = np.isfinite(e) & np.isfinite(g)
    mag = np.where(finite, np.maximum(np.abs(np.where(finite, e, 0.0)), np.abs(np.where(finite, g, 0.0))), 0.0)
    axes = tuple(i for i in range(mag.ndim) if i != 1)
    scale = np.maximum(mag.max(axis=axes, initial=0.0), np.finfo(float).tiny)
    scale = scale.reshape((1, -1) + (1,) * (mag.ndim - 2))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(np.where(finite, e - g, 0.0)) / scale, 0.0)
    return (diff > REL_TOL) | (~finite & (e != g)), float(diff.max(initial=0.0))


def _new_node(spike: bool) -> dict:
    return {"kind": "spike" if spike else "real", "compared": 0, "mismatches": 0, "samples_mismatched": 0,
            "max_rel_diff": 0.0, "min_margin": None, "worst": []}


class Accumulator:
    """Per-node counts and per-sample verdicts of samples ``[lo, hi)``, chunk by chunk."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi
        self.nodes: dict[str, dict] = {}
        self.bad = np.zeros(hi - lo, dtype=np.int64)  # mismatching values per sample
        self.targets: dict[str, list] = {}

    def add(self, node: str, a: int, expected, got, spike: bool, margin=None) -> None:
        """One comparison of node ``node`` over the chunk starting at global sample ``a``."""
        stats = self.nodes.setdefault(node, _new_node(spike))
        b = a + got.shape[1]
        if expected.shape != got.shape:  # as the checker: a shape difference is one mismatch (here, every sample's)
            stats["mismatches"] += 1
            stats["samples_mismatched"] += b - a
            self.bad[a - self.lo:b - self.lo] += 1
            stats.setdefault("error", f"shapes differ: source {tuple(expected.shape)}, deployed {tuple(got.shape)}")
            return
        bad, rel = _mismatch_mask(expected, got, spike)
        per_sample = bad.reshape(bad.shape[0], bad.shape[1], -1).sum(axis=(0, 2))
        self.bad[a - self.lo:b - self.lo] += per_sample
        stats["compared"] += int(bad.size)
        stats["mismatches"] += int(per_sample.sum())
        stats["samples_mismatched"] += int((per_sample > 0).sum())
        stats["max_rel_diff"] = max(stats["max_rel_diff"], rel)
        if margin is not None and margin.shape == bad.shape and margin.size:
            low = float(np.min(margin))
            stats["min_margin"] = low if stats["min_margin"] is None else min(stats["min_margin"], low)
        if per_sample.any():
            stats["worst"] = _worst(stats["worst"] + _candidates(bad, expected, got, margin, a))

    def to_dict(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "nodes": self.nodes, "bad": self.bad, "targets": self.targets}


def _candidates(bad, expected, got, margin, a: int) -> list[dict]:
    """At most ``WORST`` mismatches of one chunk: the smallest margins first (in order when there is no margin)."""
    flat = bad.ravel()
    if margin is not None and margin.shape == bad.shape:
        keyed = np.where(flat, np.abs(margin.ravel()), np.inf)
        k = min(WORST, int(flat.sum()))
        picks = np.argpartition(keyed, k - 1)[:k] if k < keyed.size else np.arange(keyed.size)
        picks = [int(i) for i in picks if flat[i]]
    else:
        picks = [int(i) for i in np.flatnonzero(flat)[:WORST]]
    found = []
    for i in picks:
        pos = np.unravel_index(i, bad.shape)
        found.append({"sample": a + int(pos[1]), "step": int(pos[0]), "index": [int(j) for j in pos[2:]],
                      "expected": float(expected[pos]), "got": float(got[pos]),
                      "margin": None if margin is None or margin.shape != bad.shape else float(margin[pos])})
    return found


def _worst(items: list[dict]) -> list[dict]:
    key = lambda m: (m["margin"] is None, abs(m["margin"]) if m["margin"] is not None else 0.0, m["sample"],
                     m["step"], m["index"])
    return sorted(items, key=key)[:WORST]


def compare_chunk(acc: Accumulator, graph, model, x: np.ndarray, a: int, trace) -> None:
    """The source ``model`` (the multi-step module) against the deployed ``graph`` on chunk ``x`` ``[T, B, ...]``
    starting at global sample ``a``: every node ``compare_with_torch`` compares, with the same margins, each once."""
    from spikec.core.checker import run_torch
    module_outputs = dict(graph.meta.get("module_outputs", ()))
    outputs, captured = run_torch(model, x, module_outputs)
    done = set()  # a node both a module's output and a returned output is compared once (the checker does twice)
    for module, node in module_outputs.items():
        if module in captured and node in graph and node not in done:
            done.add(node)
            t = graph.node(node).type
            got = per_step_sum(trace.values[node], t.substeps) if t.substeps > 1 else trace.values[node]
            margin = trace.margins.get(node) if t.substeps == 1 else None
            acc.add(node, a, captured[module], got, t.is_spike, margin)
    for name, out in zip(graph.outputs, outputs):
        if name not in done:
            acc.add(name, a, out, trace.values[name], graph.node(name).type.is_spike, trace.margins.get(name))


def add_target(acc: Accumulator, name: str, a: int, b: int, summary: dict) -> None:
    acc.targets.setdefault(name, []).append({"samples": [a, b], **summary})


def merge_targets(parts: list[dict]) -> dict:
    """One target's chunk summaries as one: ``equivalent`` if every chunk's is; counts summed, ``max_*`` the
    largest, flags all-true; the first failing chunk's error and mismatches, naming its samples."""
    merged: dict = {"equivalent": all(p.get("equivalent") for p in parts), "chunks": len(parts),
                    "chunks_failed": [p["samples"] for p in parts if not p.get("equivalent")]}
    for p in parts:
        for k, v in p.items():
            if k in ("equivalent", "samples"):
                continue
            if isinstance(v, bool):
                merged[k] = merged.get(k, True) and v
            elif isinstance(v, int) and (k in SUMMED or k.endswith("_mismatches")):
                merged[k] = merged.get(k, 0) + v
            elif isinstance(v, (int, float)) and k.startswith("min"):
                merged[k] = min(merged.get(k, v), v)
            elif isinstance(v, (int, float)):  # max_rel_diff, and per-chunk sizes (nodes_compared): the largest
                merged[k] = max(merged.get(k, v), v)
    bad = next((p for p in parts if not p.get("equivalent")), None)
    if bad is not None:
        merged["first_failure"] = {"samples": bad["samples"], **{k: bad[k] for k in ("error", "first_mismatches")
                                                                 if k in bad}}
        if "error" in bad:
            merged["error"] = f"samples {bad['samples'][0]}-{bad['samples'][1] - 1}: {bad['error']}"
    return merged


def merge(shards: list[dict]) -> tuple[dict, np.ndarray, dict]:
    """``(nodes, mismatching values per sample, {target: merged})`` of shard results, in sample order."""
    shards = sorted(shards, key=lambda s: s["lo"])
    nodes: dict[str, dict] = {}
    for s in shards:
        for name, st in s["nodes"].items():
            n = nodes.setdefault(name, _new_node(st["kind"] == "spike"))
            for k in ("compared", "mismatches", "samples_mismatched"):
                n[k] += st[k]
            n["max_rel_diff"] = max(n["max_rel_diff"], st["max_rel_diff"])
            if st["min_margin"] is not None:
                n["min_margin"] = st["min_margin"] if n["min_margin"] is None else min(n["min_margin"],
                                                                                       st["min_margin"])
            n["worst"] = _worst(n["worst"] + st["worst"])
            if "error" in st:
                n.setdefault("error", st["error"])
    bad = np.concatenate([np.asarray(s["bad"]) for s in shards]) if shards else np.zeros(0, np.int64)
    names = sorted({t for s in shards for t in s["targets"]})
    targets = {t: merge_targets([p for s in shards for p in s["targets"].get(t, [])]) for t in names}
    return nodes, bad, targets


def source_summary(nodes: dict, bad: np.ndarray) -> dict:
    """The merged source-vs-deployed check: totals as the checker's summary has them, per node, per sample."""
    spikes = sum(n["compared"] for n in nodes.values() if n["kind"] == "spike")
    values = sum(n["compared"] for n in nodes.values() if n["kind"] == "real")
    spike_bad = sum(n["mismatches"] for n in nodes.values() if n["kind"] == "spike")
    real_bad = sum(n["mismatches"] for n in nodes.values() if n["kind"] == "real")
    failing = np.flatnonzero(bad)
    return {"equivalent": not spike_bad and not real_bad, "nodes_compared": len(nodes), "spikes_compared": spikes,
            "values_compared": values, "spike_mismatches": spike_bad, "real_mismatches": real_bad,
            "max_rel_diff": max((n["max_rel_diff"] for n in nodes.values()), default=0.0),
            "samples": int(bad.size), "samples_equivalent": int(bad.size - failing.size),
            "samples_not_equivalent": int(failing.size), "not_equivalent_samples": [int(i) for i in failing],
            "per_sample": [bool(b == 0) for b in bad], "nodes": nodes}
