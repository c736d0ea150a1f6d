"""Compile time and peak memory at scale: ``compile_model`` on the published RIPE backbone (or SEW-ResNet-18) vs one
float64 forward.

Workload: ``examples/ripe/model.py`` ``published(steps=T)`` (widths 32/64/128, DS-MPA on, 2x128x128 input,
~1.0 M parameters), untrained (torch's default initialisation after ``torch.manual_seed(seed)``), compiled as
``spikec compile`` does without probes: ``CompileOptions(model=".../model.py:published", passes="default")``
(through a factory here that passes T), i.e. random binary verification inputs ``[T, B, 2, 128, 128]``
(p = 0.3, seed 0), T = 10 (the model's declared steps), B = 4 (the default batch), default passes, no target.

``--model sew_resnet18``: ``examples/sew_resnet/model.py`` ``sew_resnet18(steps=T)``, SpikingJelly's style (``layer.*``
wrappers, ``SeqToANNContainer``, multi-step ``IFNode``, SEW blocks with the ADD connect function), ResNet-18's
layout (11.7 M parameters), 3x224x224 input, untrained with calibrated BN statistics (its neurons fire at ~25 %),
compiled the same way on random binary inputs ``[T, B, 3, 224, 224]``, T = 4, B = 2 by default, with one difference:
the model object is built before the timer (its factory constructs 11.7 M parameters and calibrates every BatchNorm
with a training-mode forward: the user's code, not the compiler's, and outside the forward child's timing too), and
the timed call is what ``spikec.compile(model)`` runs on it (``api.compile_with``: a private copy, the finite check,
then ``compile_model``). RIPE's factory is cheap and stays inside the timed call, as before.

Protocol: every measurement runs in a fresh subprocess, so ``ru_maxrss`` (the process's peak resident set) belongs
to that measurement alone; a compile that reports ``stages`` resets the kernel's high-water mark per stage, so its
peak is the larger of ``ru_maxrss`` and the stages' peaks. Alternately: (a) one float64 PyTorch forward of the
same model (same seed, same weights, ``.double().eval()``, ``torch.no_grad()``) on the same inputs the compile
draws; (b) with ``--baseline DIR``, one ``compile_model`` of another checkout (before/after side by side); (c) one
``compile_model``. The forward child runs the forward twice and reports the second (warm) call; a compile child
times the call to ``compile_model`` (cold: its first forward is inside). Ratio per pair = compile seconds /
forward seconds; the median of the per-pair ratios is printed last, beside the same ratio of CPU time (process
time of the timed call, all threads: less sensitive than wall time to other processes on a shared machine). Each compile child also prints a fingerprint
of its report (sha256 of report.json without its timings -- ``seconds``, ``passes[i].seconds``, ``stages`` -- and
without ``provenance``, which hashes this very file): a change that alters any result changes the fingerprint.
The per-stage seconds / peak memory of ``report["stages"]`` are printed when the report has them.

    .venv/bin/python benchmarks/bench_compile_scale.py              # T=10, B=4, 128x128, 2 pairs (~1-2 min idle)
    .venv/bin/python benchmarks/bench_compile_scale.py --quick      # T=2, B=2, 1 pair (smoke run)
    .venv/bin/python benchmarks/bench_compile_scale.py --model sew_resnet18   # T=4, B=2, 224x224, 2 pairs
    git archive REV | tar -x -C /tmp/old && .venv/bin/python benchmarks/bench_compile_scale.py --baseline /tmp/old

``--cli``: each compile is the whole ``spikec compile`` process instead (``python -m spikec.app.cli compile
.../bench_compile_scale.py:published_model --no-probes --target none --batch B -o TMP``: start-up, imports, the
compile and writing OUTDIR), its CPU time and peak taken from ``getrusage(RUSAGE_CHILDREN)`` around it; the
ratio is that process's CPU over one warm float64 forward (the issue's "whole CLI process, no probes").

The machine may be shared: the figures are noisy; the per-pair ratio (both measured back to back) is the
figure to trust, and the load average is printed with every pair.
"""
import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `spikec` without an install
RIPE = ROOT / "examples" / "ripe" / "model.py"
SEW = ROOT / "examples" / "sew_resnet" / "model.py"
TIMING_KEYS = ("seconds", "stages")
STEPS_ENV = "SPIKEC_BENCH_COMPILE_STEPS"
# --model NAME -> (factory in this file, default T, default B, what it is, built before the timer?)
MODELS = {"ripe": ("published_model", 10, 4, "RIPE published (32/64/128, DS-MPA, 2x128x128)", False),
          "sew_resnet18": ("sew_model", 4, 2, "SEW-ResNet-18, SpikingJelly style (IFNode, ADD, 3x224x224)", True)}


def published_model():
    """Factory for the spikec loader: ``published(steps=T)`` with T from the environment (default 10)."""
    from spikec.app.loader import load_factory
    return load_factory(f"{RIPE}:published")(steps=int(os.environ.get(STEPS_ENV, "10")))


def sew_model():
    """Factory for the spikec loader: ``sew_resnet18(steps=T)`` with T from the environment (default 4)."""
    from spikec.app.loader import load_factory
    return load_factory(f"{SEW}:sew_resnet18")(steps=int(os.environ.get(STEPS_ENV, "4")))


def _options(steps: int, batch: int, model: str = "ripe"):
    from spikec.app.driver import CompileOptions
    os.environ[STEPS_ENV] = str(steps)
    return CompileOptions(model=f"{Path(__file__).resolve()}:{MODELS[model][0]}", passes="default", batch=batch)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def fingerprint(report: dict) -> str:
    """sha256 of the report without its timings (what must not change when only speed and memory do)."""
    r = {k: v for k, v in report.items() if k not in TIMING_KEYS + ("provenance",)}  # provenance: file hashes
    r["passes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in r.get("passes", [])]
    return hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest()[:16]


def child_forward(steps: int, batch: int, seed: int, model_name: str = "ripe") -> dict:
    import torch
    from spikec.app.driver import load_source, make_inputs
    torch.manual_seed(seed)
    opts = _options(steps, batch, model_name)
    model = load_source(opts)
    x, _, _ = make_inputs(model, opts)
    model = model.double().eval()
    xt = torch.as_tensor(x, dtype=torch.float64)
    times, cpu = [], []
    for _ in range(2):
        start, start_cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            model(xt)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"seconds": times[-1], "cold_seconds": times[0], "cpu": cpu[-1], "peak_mb": _peak_mb()}


def child_compile(steps: int, batch: int, seed: int, model_name: str = "ripe") -> dict:
    import torch
    from spikec.app.api import compile_with
    from spikec.app.driver import compile_model, load_source
    torch.manual_seed(seed)
    opts = _options(steps, batch, model_name)
    instance = load_source(opts) if MODELS[model_name][4] else None  # the user's model object, built untimed
    start, start_cpu = time.perf_counter(), time.process_time()
    # a built model is compiled as spikec.compile(model) does it (a private copy, checked, then compile_model)
    compiled = compile_model(opts) if instance is None else compile_with(opts, instance=instance).compiled
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    r = compiled.report
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # report["stages"] resets the kernel's high-water mark at each stage: the process peak is the larger of
    # ru_maxrss and the stages' peaks
    peak = max([_peak_mb()] + [s["peak_memory_mb"] for s in r.get("stages") or ()])
    rates = [v["rate"] for v in r.get("firing_rates", {}).values()]
    return {"seconds": seconds, "cpu": cpu, "peak_mb": peak, "user": usage.ru_utime, "sys": usage.ru_stime,
            "equivalent": r["equivalent"], "fingerprint": fingerprint(r), "stages": r.get("stages"),
            "rates": [min(rates), max(rates)] if rates else None, "warnings": len(r.get("warnings") or ())}


def child_cli(steps: int, batch: int, seed: int, model_name: str = "ripe", root=None) -> dict:
    """The whole ``spikec compile`` CLI process on the model (no probes, no target): CPU and peak of that process
    and its forked command child, from ``RUSAGE_CHILDREN`` (this process runs nothing else)."""
    import tempfile
    env = {**os.environ, STEPS_ENV: str(steps), "TQDM_DISABLE": "1"}
    if root:
        env["PYTHONPATH"] = str(Path(root).resolve())
    spec = f"{Path(__file__).resolve()}:{MODELS[model_name][0]}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "spikec.app.cli", "compile", spec, "--no-probes", "--target", "none",
               "--batch", str(batch), "--seed", "0", "-o", str(out)]
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env)
        seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1):
            raise SystemExit(f"the CLI failed ({done.returncode}): {done.stderr[-2000:]}")
        r = json.loads((out / "report.json").read_text())
    user, sys_ = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    rates = [v["rate"] for v in r.get("firing_rates", {}).values()]
    return {"seconds": seconds, "cpu": user + sys_, "peak_mb": after.ru_maxrss / 1024, "user": user, "sys": sys_,
            "equivalent": r["equivalent"], "fingerprint": fingerprint(r), "stages": r.get("stages"),
            "rates": [min(rates), max(rates)] if rates else None, "warnings": len(r.get("warnings") or ())}


def measure(kind: str, args, root=None) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--steps", str(args.steps), "--batch", str(args.batch),
           "--seed", str(args.seed), "--model", args.model] + (["--root", str(root)] if root else [])
    if kind == "compile" and args.cli:
        cmd[cmd.index("compile")] = "cli"
    env = {**os.environ, "TQDM_DISABLE": "1"}
    if args.threads:  # torch's intra-op threads (both children alike)
        env.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rates(c: dict) -> str:
    return "none" if not c.get("rates") else f"{c['rates'][0]:.2f}-{c['rates'][1]:.2f}"


def print_stages(stages) -> None:
    if not stages:
        print("    (no per-stage figures in this report)")
        return
    for s in stages:
        cpu = f"  CPU {s['cpu_seconds']:7.2f} s" if "cpu_seconds" in s else ""
        print(f"    {s['stage']:<28} {s['seconds']:8.2f} s{cpu}   peak {s['peak_memory_mb']:8.0f} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=tuple(MODELS), default="ripe")
    ap.add_argument("--steps", type=int, help="T (default: ripe 10, sew_resnet18 4)")
    ap.add_argument("--batch", type=int, help="B (default: ripe 4, sew_resnet18 2)")
    ap.add_argument("--pairs", type=int, default=2, help="alternating (forward, compile) pairs")
    ap.add_argument("--threads", type=int, help="OMP_NUM_THREADS of every child (default: torch's default); 1 makes "
                    "CPU time a steadier measure of work on a shared machine (no thread waiting for a descheduled one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="T=2, B=2, 1 pair")
    ap.add_argument("--baseline", metavar="DIR", help="also compile with the spikec of another checkout DIR (e.g. "
                    "`git archive REV | tar -x -C DIR`), in each pair: before/after side by side")
    ap.add_argument("--cli", action="store_true", help="time the whole `spikec compile` process (start-up, imports, "
                    "writing OUTDIR; no probes) instead of the call to compile_model")
    ap.add_argument("--child", choices=("forward", "compile", "cli"), help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "cli":  # the CLI process of this checkout or of --root's
        print(json.dumps(child_cli(args.steps, args.batch, args.seed, args.model, args.root)))
        return
    if args.root:  # the compile of another checkout: its spikec first on the path
        sys.path.insert(0, str(Path(args.root).resolve()))
        import spikec
        assert Path(spikec.__file__).resolve().is_relative_to(Path(args.root).resolve()), spikec.__file__
    if args.child:
        run = child_forward if args.child == "forward" else child_compile
        print(json.dumps(run(args.steps, args.batch, args.seed, args.model)))
        return
    _, steps, batch, what, _ = MODELS[args.model]
    args.steps, args.batch = args.steps or steps, args.batch or batch
    if args.quick:
        args.steps, args.batch, args.pairs = 2, 2, 1
    import torch
    print(f"{what}, untrained seed {args.seed}; T={args.steps}, B={args.batch}, default passes, no target"
          f"{'; the whole CLI process, no probes' if args.cli else ''}; "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs, threads {args.threads or 'default'}")
    ratios, cpu_ratios, fwd, comp, base = [], [], [], [], []
    for i in range(args.pairs):
        f = measure("forward", args)
        if args.baseline:
            b = measure("compile", args, args.baseline)
            base.append(b)
            print(f"pair {i + 1} baseline ({args.baseline}): compile {b['seconds']:.2f} s (user {b['user']:.1f} s, sys "
                  f"{b['sys']:.1f} s), peak {b['peak_mb']:.0f} MB, fingerprint {b['fingerprint']} | ratio "
                  f"{b['seconds'] / f['seconds']:.2f}x (CPU time {b['cpu'] / f['cpu']:.2f}x)")
        c = measure("compile", args)
        fwd.append(f), comp.append(c), ratios.append(c["seconds"] / f["seconds"])
        cpu_ratios.append(c["cpu"] / f["cpu"])
        print(f"pair {i + 1}: forward {f['seconds']:.2f} s (cold {f['cold_seconds']:.2f} s), peak {f['peak_mb']:.0f} MB"
              f" | compile {c['seconds']:.2f} s (user {c['user']:.1f} s, sys {c['sys']:.1f} s), peak "
              f"{c['peak_mb']:.0f} MB, equivalent {c['equivalent']}, firing rates {_rates(c)}, "
              f"{c['warnings']} warning(s), report fingerprint {c['fingerprint']} | ratio "
              f"{ratios[-1]:.2f}x (CPU time {c['cpu']:.1f} s / {f['cpu']:.1f} s = {cpu_ratios[-1]:.2f}x) | load average "
              f"{os.getloadavg()[0]:.1f}")
    print("  stages of the last compile:")
    print_stages(comp[-1]["stages"])
    print(f"median: forward {statistics.median(x['seconds'] for x in fwd):.2f} s, compile "
          f"{statistics.median(x['seconds'] for x in comp):.2f} s, compile peak "
          f"{statistics.median(x['peak_mb'] for x in comp):.0f} MB (forward peak "
          f"{statistics.median(x['peak_mb'] for x in fwd):.0f} MB)")
    if base:
        print(f"baseline: compile {statistics.median(x['seconds'] for x in base):.2f} s, peak "
              f"{statistics.median(x['peak_mb'] for x in base):.0f} MB, compile / forward "
              f"{statistics.median(b['seconds'] / f['seconds'] for b, f in zip(base, fwd)):.2f}x (CPU time "
              f"{statistics.median(b['cpu'] / f['cpu'] for b, f in zip(base, fwd)):.2f}x); same report: "
              f"{all(b['fingerprint'] == c['fingerprint'] for b, c in zip(base, comp))}")
    print(f"compile / one float64 forward: {statistics.median(ratios):.2f}x (CPU time "
          f"{statistics.median(cpu_ratios):.2f}x), compile peak {statistics.median(x['peak_mb'] for x in comp):.0f} MB")


if __name__ == "__main__":
    main()
