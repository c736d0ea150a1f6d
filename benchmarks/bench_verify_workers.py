"""Dataset-wide verification throughput: ``spikec verify --workers 1`` vs ``--workers 2``, same run, same data.

Workload: the digits example (``examples/digits/model.py:small`` with its checkpoint) compiled once with
``--target onnx`` into a temporary OUTDIR; a data set of 1,536 samples ``[8, 1536, 1, 8, 8]`` made by tiling the
example's 16 recorded input samples (``examples/digits/inputs.npz``) 96 times, saved as a compressed ``.npz``.

Protocol: ``spikec.verify(outdir, data, workers=N, run_source=True)`` (source vs deployed on every sample, and the ONNX artifact on
every chunk; progress off). One warm-up of each (the forkserver starts on the first 2-worker run), then alternating
rounds 1, 2, 1, 2, ...; per-round wall time with ``time.perf_counter``; medians. Every run's merged counts are
checked equal to the first run's. ``--workers 1`` runs in this process with torch's default threads; each of the
two workers uses ``cores // 2`` threads. The last line prints the speed-up (median 1-worker time / median 2-worker
time) and the samples per second of each.

    .venv/bin/python benchmarks/bench_verify_workers.py             # 1,536 samples, 3 rounds (~1 min on 2 cores)
    .venv/bin/python benchmarks/bench_verify_workers.py --quick     # 256 samples, 1 round
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `spikec` without an install
DIGITS = ROOT / "examples" / "digits"


def compile_digits(out: Path) -> None:
    from click.testing import CliRunner
    from spikec.app.cli import main
    result = CliRunner().invoke(main, ["compile", f"{DIGITS / 'model.py'}:small", "--weights",
                                       str(DIGITS / "checkpoint.pt"), "--inputs", str(DIGITS / "inputs.npz"),
                                       "--target", "onnx", "-o", str(out)])
    if result.exit_code != 0:
        raise SystemExit(f"compile failed:\n{result.output}")


def make_data(path: Path, samples: int) -> None:
    with np.load(DIGITS / "inputs.npz") as z:
        x = z["input"]
    reps = -(-samples // x.shape[1])
    np.savez_compressed(path, input=np.tile(x, (1, reps, 1, 1, 1))[:, :samples])


def counts(result: dict) -> dict:
    return {"source": result["source_vs_deployed"], "onnx": result.get("target_onnx")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=1536)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="256 samples, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.samples, args.rounds = 256, 1
    import spikec
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}; digits example, "
          f"{args.samples:,} samples [8, {args.samples}, 1, 8, 8], targets: source vs deployed + onnx")
    with tempfile.TemporaryDirectory() as tmp:
        out, data = Path(tmp) / "out", Path(tmp) / "data.npz"
        compile_digits(out)
        make_data(data, args.samples)
        times, reference = {1: [], 2: []}, None
        for round_ in range(args.rounds + 1):  # round 0 is the warm-up
            for workers in (1, 2):
                t0 = time.perf_counter()
                result = spikec.verify(out, data, workers=workers, run_source=True)  # OUTDIR is our own
                elapsed = time.perf_counter() - t0
                reference = reference or counts(result)
                if counts(result) != reference:
                    raise SystemExit(f"--workers {workers} merged different counts than the first run")
                if round_:
                    times[workers].append(elapsed)
                print(f"  {'warm-up' if not round_ else f'round {round_}'}: --workers {workers}: {elapsed:6.2f} s"
                      f"  ({result['source_vs_deployed']['samples_equivalent']:,} of {args.samples:,} samples "
                      f"equivalent, {result['source_vs_deployed']['spikes_compared']:,} spikes)")
    med = {w: statistics.median(v) for w, v in times.items()}
    load = os.getloadavg()
    print(f"load average now {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (the cores may be shared: the figure is noisy)")
    print(f"verification throughput, {args.samples:,} samples: 1 worker {args.samples / med[1]:.0f} samples/s "
          f"({med[1]:.2f} s), 2 workers {args.samples / med[2]:.0f} samples/s ({med[2]:.2f} s): speed-up "
          f"{med[1] / med[2]:.2f}x")


if __name__ == "__main__":
    main()
