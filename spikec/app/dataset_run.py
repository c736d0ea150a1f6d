"""Dataset-wide verification, the runners: ``verify_dataset`` splits a data set into shards (``spikec.app.dataset``),
runs them inline (one worker), in worker processes (``--workers N``) or as Ray tasks (``--ray ADDRESS``), and merges
one report.

Worker processes come from a ``forkserver`` (a clean process that imported spikec and never ran torch, so no
thread pool is forked half-used). They ignore SIGINT: Ctrl-C reaches the whole process group, and the parent alone
decides; on any way out of ``run_processes`` (done, a failed shard, KeyboardInterrupt, SIGTERM's ``Interrupted``) it
terminates every worker still alive, waits ``SETTLE`` seconds, and kills what is left. A worker whose parent is gone
exits at its next chunk.
"""
import multiprocessing as mp
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

from spikec.app import loader
from spikec.app.conventions import choose
from spikec.app.dataset import (CHUNK, Accumulator, add_target, chunks, compare_chunk, merge, open_dataset,
                                plan_shards, read_shard, source_summary)
from spikec.app.verify import ARTIFACTS, _claimed_targets, _read_report, not_run, replay_source, source_mode
from spikec.ir import errors
from spikec.ir.errors import BadInput, SpikecError
from spikec.core.interpreter import run
from spikec.core.serialize import load_graph
from spikec.targets import VERIFIERS, get_target
from spikec.targets.onnx.sessions import reused

SETTLE = 2.0          # seconds a terminated worker gets before it is killed
DEFAULT_SKIP = ("lava",)  # targets a data-set run skips unless named (--targets all or lava): Lava runs are slow


class WorkerError(SpikecError):
    """A shard's worker failed in a way that is not a named spikec error (a crash, a bug, a lost Ray task)."""


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_workers(workers) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BadInput(f"--workers {workers!r}: the number of worker processes must be an integer >= 1",
                       remedy=f"give --workers 1 (in this process) up to {_cpus()} (this machine's cores)")
    return workers


def select_targets(out: Path, report: dict, targets) -> tuple[list[str], list[str], dict]:
    """``(targets to run on each chunk, present but skipped, {check: failure})`` for ``--targets``: ``default``
    (every artifact OUTDIR holds but Lava's), ``all``, ``none``, or names (``onnx,nir``)."""
    present = [n for n, p in ARTIFACTS.items() if (out / p).exists()]
    spec = ",".join(targets) if isinstance(targets, (list, tuple)) else str(targets)
    if spec == "none":
        return [], present, {}
    missing = {f"target_{c}": {"equivalent": False, "error": f"report.json records target {c!r} but "
                                                            f"{ARTIFACTS[c]} is missing"}
               for c in _claimed_targets(report) if c not in present}
    if spec == "default":
        names = [n for n in present if n not in DEFAULT_SKIP]
    elif spec == "all":
        names = present
    else:
        names = [n.strip() for n in spec.split(",") if n.strip()]
        for n in names:
            if n not in ARTIFACTS:
                raise BadInput(f"--targets {spec!r}: {n!r} is not a target",
                               remedy=f"use default, all, none or names among {', '.join(ARTIFACTS)}")
            if n not in present:
                raise BadInput(f"--targets {spec!r}: OUTDIR holds no {ARTIFACTS[n]}",
                               remedy=f"name targets OUTDIR holds ({', '.join(present) or 'none'}), or none")
    for n in names:
        get_target(n)
    return names, [n for n in present if n not in names], missing


def _target(out: Path, name: str, graph, x, trace) -> dict:
    get_target(name)  # registers its verifier (in a worker process too)
    try:
        return VERIFIERS[name](out, graph, x, trace)
    except OSError as e:
        raise BadInput(f"cannot read {str(out / ARTIFACTS[name])!r}: {type(e).__name__}: {e}",
                       remedy="recompile (verify re-checks every target artifact OUTDIR holds)") from e


def run_shard(job: dict, progress=None) -> dict:
    """One shard: its samples read from the file, compared chunk by chunk (source vs deployed, and each target)."""
    out = Path(job["outdir"])
    report = _read_report(out)
    graph = load_graph(out)
    opts, source, _ = replay_source(out, report, job["model"], job["weights"], job["trust_pickle"],
                                    run_source=job["run_source"])
    ds, lo, hi = job["dataset"], job["lo"], job["hi"]
    raw = read_shard(ds, lo, hi)
    acc, stepping = Accumulator(lo, hi), opts.stepping
    from spikec.targets.lava.supervisor import session   # stdlib only; starts nothing until a Lava job
    with reused(), session():   # one onnxruntime session per model, one Lava session for all chunks
        for a, b in chunks(lo, hi, job["chunk"]):
            part = raw[a - lo:b - lo] if ds.axis == 0 else raw[:, a - lo:b - lo]
            x = loader.check_spike_input(part, f"array 'input' of {ds.path!r} (samples {a}-{b - 1})",
                                         2 if ds.axis == 0 else 3)
            kind, ceiling = loader.value_kind(x)
            conv = choose(source, stepping, x, kind, ceiling, as_given=ds.axis == 0)
            stepping = conv.stepping  # auto decided once; a loop model is bound again to each chunk
            trace = run(graph, conv.x)
            compare_chunk(acc, graph, conv.model, conv.x, a, trace)
            for name in job["targets"]:
                add_target(acc, name, a, b, _target(out, name, graph, conv.x, trace))
            del trace
            if progress is not None:
                progress(b - a)
    return acc.to_dict()


def _describe(e: BaseException) -> dict:
    """What the parent needs to name a worker's failure (exceptions with keyword arguments do not pickle back)."""
    return {"cls": type(e).__name__, "spikec": isinstance(e, SpikecError), "message": str(e),
            "what": getattr(e, "what", str(e)), "where": getattr(e, "where", ""), "remedy": getattr(e, "remedy", ""),
            "traceback": traceback.format_exc()}


def _shard_error(job: dict, info: dict) -> SpikecError:
    where = f"shard {job['index']} (samples {job['lo']}-{job['hi'] - 1})"
    cls = getattr(errors, info["cls"], None)
    if info["spikec"] and isinstance(cls, type) and issubclass(cls, SpikecError):
        return cls(info["what"], where=f"{where}: {info['where']}" if info["where"] else where,
                   remedy=info["remedy"])
    return WorkerError(f"{where} failed: {info['cls']}: {info['message']}\n{info['traceback']}".rstrip(),
                       remedy="run with --workers 1 --debug to see it in this process; if the data and the OUTDIR "
                              "are fine, please report it")


def _limit_threads(n: int) -> None:
    import torch
    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(n)
    except ImportError:  # optional: numpy's BLAS keeps its default
        pass


def _worker(job: dict, conn) -> None:
    """A worker process: Ctrl-C is the parent's to handle; a lost parent ends the worker at its next chunk."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _limit_threads(job["threads"])
    from tqdm import tqdm
    tqdm.set_lock(threading.RLock())  # no multiprocessing semaphore for the interpreter's (silent) bars to leak

    def progress(n):
        try:
            os.kill(job["parent"], 0)
        except ProcessLookupError:
            os._exit(1)
        conn.send(("progress", n))
    try:
        conn.send(("done", run_shard(job, progress)))
    except BaseException as e:  # reported to the parent, which names the shard
        conn.send(("error", _describe(e)))
    finally:
        conn.close()


def _stop(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + SETTLE
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def _dead(job: dict, p) -> WorkerError:
    p.join(SETTLE)
    code = p.exitcode
    how = "still running" if code is None else f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    return WorkerError(f"shard {job['index']} (samples {job['lo']}-{job['hi'] - 1}): its worker process ended "
                       f"({how}) without a result", remedy="if it ran out of memory (signal 9), use more --workers "
                       "(smaller shards) or fewer at once; otherwise run with --workers 1 to see the error")


def _collect(jobs, procs, readers, bar) -> list[dict]:
    """Progress and results from each worker's pipe; a pipe closed before its result is a dead worker."""
    done, waiting = {}, dict(zip(readers, zip(jobs, procs)))
    while waiting:
        for r in mp.connection.wait(list(waiting), timeout=0.5):
            job, p = waiting[r]
            try:
                kind, payload = r.recv()
            except EOFError:
                raise _dead(job, p) from None
            if kind == "progress":
                bar.update(payload)
            elif kind == "done":
                done[job["index"]] = payload
                del waiting[r]
            else:
                raise _shard_error(job, payload)
    return [done[j["index"]] for j in jobs]


def run_processes(jobs: list[dict], bar) -> list[dict]:
    """Each shard in its own worker process, reporting through its own pipe; every worker is ended whichever way
    this returns."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["spikec.app.dataset_run", "spikec.targets.onnx", "onnxruntime"])
    procs, readers = [], []
    try:
        for job in jobs:
            reader, writer = ctx.Pipe(duplex=False)
            readers.append(reader)
            p = ctx.Process(target=_worker, args=(job, writer), name=f"spikec-verify-shard-{job['index']}",
                            daemon=True)
            try:
                p.start()
            except (pickle.PicklingError, AttributeError, TypeError) as e:
                raise BadInput(f"the model cannot be sent to worker processes: {type(e).__name__}: {e}",
                               remedy="use workers=1, or give the model as 'file.py:factory'") from e
            finally:
                writer.close()  # the worker holds the only writer: its end (or death) closes the pipe
            procs.append(p)
        return _collect(jobs, procs, readers, bar)
    finally:
        _stop(procs)
        for r in readers:
            r.close()


def _ray_shard(job: dict):
    _limit_threads(job["threads"])
    from tqdm import tqdm
    tqdm.set_lock(threading.RLock())
    try:
        return "done", run_shard(job)
    except Exception as e:
        return "error", _describe(e)


def run_ray(jobs: list[dict], address: str, bar) -> list[dict]:
    """Each shard as a Ray task (``address``: a cluster's, or ``local`` for a local Ray of ``len(jobs)`` CPUs)."""
    try:
        import ray
    except ImportError as e:
        raise BadInput("--ray needs Ray, which is not installed here",
                       remedy="install it into the venv (.venv/bin/pip install ray==2.60.0; `make venv` tries it), "
                              "or use --workers N") from e
    started = not ray.is_initialized()
    if started:
        quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "error"}
        try:
            ray.init(num_cpus=len(jobs), **quiet) if address == "local" else ray.init(address=address, **quiet)
        except Exception as e:  # an unreachable or malformed address
            raise BadInput(f"--ray {address!r}: cannot connect: {type(e).__name__}: {e}",
                           remedy="give a running Ray cluster's address (ray://host:10001, host:6379, auto) or "
                                  "local") from e
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_shard)
    refs = {remote.remote(job): job for job in jobs}
    pending, found = list(refs), {}
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in ready:
                job = refs[ref]
                try:
                    kind, payload = ray.get(ref)
                except Exception as e:  # the task itself was lost (worker died, cluster gone)
                    raise WorkerError(f"shard {job['index']} (samples {job['lo']}-{job['hi'] - 1}): its Ray task "
                                      f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                                      remedy="check the Ray cluster, or run with --workers N") from e
                if kind == "error":
                    raise _shard_error(job, payload)
                found[job["index"]] = payload
                bar.update(job["hi"] - job["lo"])
        return [found[j["index"]] for j in jobs]
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _check_memory(ds, shards, chunk: int, max_bytes) -> None:
    """A worker holds its shard (in the file's dtype) and one chunk in float64: refuse what exceeds the limit."""
    limit = loader.default_max_input_bytes() if max_bytes is None else max_bytes
    per_sample = int(np.prod(ds.shape, dtype=object)) // ds.samples
    lo, hi = max(shards, key=lambda s: s[1] - s[0])
    need = per_sample * ((hi - lo) * np.dtype(ds.dtype).itemsize + min(chunk, hi - lo) * 8)
    if need > limit:
        raise BadInput(f"a shard of {hi - lo:,} samples of {ds.path!r} needs {need:,} bytes in one worker, over the "
                       f"limit of {limit:,} bytes", remedy="use more --workers (smaller shards), or raise the limit "
                                                           "with --max-input-bytes N")


def verify_dataset(outdir, inputs, *, workers: int = 1, ray: str | None = None, targets="default", model=None,
                   weights: str | None = None, trust_pickle: bool = False, max_input_bytes: int | None = None,
                   progress: bool = False, chunk: int = CHUNK, run_source: bool = False) -> dict:
    """``{check: summary}`` over every sample of ``inputs``: ``dataset`` (layout, shards, runner, per-sample
    verdicts), ``source_vs_deployed`` (counts, per node with the smallest-margin mismatches) and ``target_NAME``.
    The source model is ``model`` or OUTDIR's ``.nir`` copy, or with ``run_source`` OUTDIR's code; else BadInput."""
    check_workers(workers)
    if inputs is None or not str(inputs).strip():
        raise BadInput("a data-set verification (--workers/--ray) needs the data set",
                       remedy="give --inputs DATA.npz (key 'input', [T, B, ...]) or DATA.npy")
    out = Path(outdir)
    report = _read_report(out)
    graph = load_graph(out)
    if len(graph.inputs) != 1:
        raise BadInput(f"the graph has {len(graph.inputs)} inputs; a data set feeds exactly one",
                       remedy="verify it without --workers")
    ds = open_dataset(inputs, graph.inputs[0].type.shape)
    if source_mode(out, model, weights, run_source) is None:
        note = not_run(out, report)
        raise BadInput("a data-set verification compares the source model with the deployed graph on every "
                       f"sample, and none runs here: {note['reason']}", remedy=note["remedy"])
    # a model or checkpoint that cannot load fails once, here
    replay_source(out, report, model, weights, trust_pickle, run_source=run_source)
    names, skipped, missing = select_targets(out, report, targets)
    shards = plan_shards(ds.samples, workers, chunk)
    _check_memory(ds, shards, chunk, max_input_bytes)
    threads = max(1, _cpus() // len(shards))
    jobs = [{"index": i, "outdir": str(out), "dataset": ds, "lo": lo, "hi": hi, "chunk": chunk, "targets": names,
             "model": model, "weights": weights, "trust_pickle": trust_pickle, "threads": threads,
             "run_source": run_source,
             "parent": os.getpid()} for i, (lo, hi) in enumerate(shards)]
    runner = "ray" if ray is not None else "inline" if len(jobs) == 1 else "processes"
    from tqdm import tqdm
    start = time.perf_counter()
    bar = tqdm(total=ds.samples, unit="sample", desc="verify", file=sys.stderr, disable=not progress,
               mininterval=0.5, dynamic_ncols=True)
    try:
        parts = run_ray(jobs, ray, bar) if runner == "ray" else \
            [run_shard(jobs[0], bar.update)] if runner == "inline" else run_processes(jobs, bar)
    finally:
        bar.close()
    nodes, bad, merged = merge(parts)
    results = {"dataset": {"equivalent": True, "path": ds.path, "samples": ds.samples, "layout": ds.layout,
                           "workers": workers, "runner": runner, "shards": [list(s) for s in shards],
                           "chunk": chunk, "targets_run": names, "targets_skipped": skipped,
                           "seconds": round(time.perf_counter() - start, 3)},
               "source_vs_deployed": source_summary(nodes, bad),
               **{f"target_{n}": merged.get(n, {"equivalent": False, "error": "no chunk ran it"}) for n in names},
               **missing}
    results["dataset"]["equivalent"] = all(r["equivalent"] for k, r in results.items() if k != "dataset")
    return results
