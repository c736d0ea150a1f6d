"""RIPE published, the issue-30 figure: CPU of the whole ``spikec compile`` process (no probes) over the CPU of one
float64 forward of the same model on the same inputs.

Workload: ``examples/ripe/model.py:published`` exactly as its users compile it (the published configuration:
widths 32/64/128, DS-MPA, 2x128x128, T = 10 as the model declares, the CLI's default batch of 4 random binary
inputs p = 0.3 seed 0, default passes, untrained weights of ``torch.manual_seed(0)``):

    spikec compile examples/ripe/model.py:published --no-probes --target none -o OUT

Protocol (each measurement a fresh process, alternating, ``--pairs`` times):
(a) the forward: ``benchmarks/bench_compile_scale.py``'s forward child -- the same model (the loader's factory,
    same seed), ``.double().eval()``, ``torch.no_grad()``, on the very inputs the compile draws
    (``driver.make_inputs``); run twice, the second (warm) call's CPU (``time.process_time``: all threads) counts;
(b) the CLI: ``python -m spikec.app.cli compile ...`` above in a subprocess; its CPU is user + sys of that process
    and its forked command child (``getrusage(RUSAGE_CHILDREN)`` of a fresh parent: start-up, imports, the compile,
    writing and re-reading OUTDIR, report.html); its peak the larger of their ``ru_maxrss`` and the largest stage
    peak of ``report.json`` (each stage resets the kernel's high-water mark, ``ru_maxrss`` with it).
The ratio of a pair is (b) / (a); the median over the pairs is printed last, with the median peak. The stages of
the last compile (``report.json`` ``stages``, CPU per stage) are printed, and the report's fingerprint (without
timings and provenance: equal fingerprints, the same report).

    .venv/bin/python benchmarks/bench_ripe.py                 # 3 pairs
    .venv/bin/python benchmarks/bench_ripe.py --threads 1     # one torch thread in both (CPU time = work done)
    git archive REV | tar -x -C /tmp/old && .venv/bin/python benchmarks/bench_ripe.py --baseline /tmp/old

The machine may be shared: CPU time is the figure to compare (wall time includes waiting), and with two torch
threads a thread that waits for a descheduled one spins, so ``--threads 1`` is the steadier measure of work.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_compile_scale import fingerprint, print_stages  # noqa: E402

SPEC = f"{ROOT / 'examples' / 'ripe' / 'model.py'}:published"
STEPS, BATCH = 10, 4  # the model's declared T; the CLI's default batch
# runs the command given as JSON, then prints its user, sys CPU seconds and peak resident kB (its own children:
# the CLI and the command child it forks; python's start-up here is not counted, it ran before the command did)
WRAP = ("import json, resource, subprocess, sys\n"
        "code = subprocess.run(json.loads(sys.argv[1]), stdout=subprocess.DEVNULL).returncode\n"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([r.ru_utime, r.ru_stime, r.ru_maxrss]))\n"
        "sys.exit(code)\n")


def _env(threads, root=None) -> dict:
    env = {**os.environ, "TQDM_DISABLE": "1"}
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if root:
        env["PYTHONPATH"] = str(Path(root).resolve())
    return env


def forward(threads) -> dict:
    """One warm float64 forward in a fresh process (bench_compile_scale's forward child on the RIPE factory)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_compile_scale.py"), "--child", "forward", "--steps",
           str(STEPS), "--batch", str(BATCH), "--seed", "0", "--model", "ripe"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, env=_env(threads))
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli(threads, root=None) -> dict:
    """The whole ``spikec compile`` process: CPU (user + sys of it and its forked child) and peak."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "spikec.app.cli", "compile", SPEC, "--no-probes", "--target", "none",
               "-o", str(out)]
        # a fresh parent per run: RUSAGE_CHILDREN's ru_maxrss is the largest child it ever waited for
        probe = [sys.executable, "-c", WRAP, json.dumps(cmd)]
        start = time.perf_counter()
        done = subprocess.run(probe, capture_output=True, text=True, cwd=tmp, env=_env(threads, root))
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"the CLI failed ({done.returncode}): {done.stderr[-2000:]}")
        user, sys_, peak = json.loads(done.stdout.strip().splitlines()[-1])
        report = json.loads((out / "report.json").read_text())
    # report.json's stages reset the kernel's high-water mark at each stage (ru_maxrss with it): the peak is the
    # larger of what the process ended with and every stage's own
    peak = max([peak / 1024] + [s["peak_memory_mb"] for s in report.get("stages") or ()])
    return {"seconds": seconds, "cpu": user + sys_, "user": user, "sys": sys_, "peak_mb": peak,
            "equivalent": report["equivalent"], "fingerprint": fingerprint(report), "stages": report.get("stages")}


def _line(what: str, c: dict, f: dict) -> str:
    return (f"{what}: CPU {c['cpu']:.1f} s (user {c['user']:.1f}, sys {c['sys']:.1f}), wall {c['seconds']:.1f} s, "
            f"peak {c['peak_mb']:.0f} MB, equivalent {c['equivalent']}, fingerprint {c['fingerprint']} | "
            f"{c['cpu'] / f['cpu']:.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--threads", type=int, help="OMP/MKL threads of both processes (default: torch's default)")
    ap.add_argument("--baseline", metavar="DIR", help="also time the CLI of another checkout in each pair")
    args = ap.parse_args()
    print(f"RIPE published ({SPEC}), T={STEPS}, B={BATCH}, no probes, no target; {os.cpu_count()} CPUs, threads "
          f"{args.threads or 'default'}")
    fwd, comp, base = [], [], []
    for i in range(args.pairs):
        f = forward(args.threads)
        fwd.append(f)
        print(f"pair {i + 1}: forward CPU {f['cpu']:.2f} s (wall {f['seconds']:.2f} s, cold {f['cold_seconds']:.2f} s),"
              f" load average {os.getloadavg()[0]:.1f}")
        if args.baseline:
            base.append(cli(args.threads, args.baseline))
            print("  " + _line(f"baseline {args.baseline}", base[-1], f))
        comp.append(cli(args.threads))
        print("  " + _line("compile", comp[-1], f))
    print("  stages of the last compile:")
    print_stages(comp[-1]["stages"])
    if base:
        print(f"baseline: CPU / forward {statistics.median(b['cpu'] / f['cpu'] for b, f in zip(base, fwd)):.2f}x, "
              f"peak {statistics.median(b['peak_mb'] for b in base):.0f} MB; same report: "
              f"{all(b['fingerprint'] == c['fingerprint'] for b, c in zip(base, comp))}")
    print(f"RIPE published, whole CLI process CPU / one float64 forward CPU: "
          f"{statistics.median(c['cpu'] / f['cpu'] for c, f in zip(comp, fwd)):.2f}x (median of {args.pairs}; compile "
          f"{statistics.median(c['cpu'] for c in comp):.1f} s, forward {statistics.median(f['cpu'] for f in fwd):.2f} s),"
          f" peak {statistics.median(c['peak_mb'] for c in comp):.0f} MB")


if __name__ == "__main__":
    main()
