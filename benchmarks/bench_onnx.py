"""Latency of the unfused PyTorch RIPE model vs the fused ONNX model in onnxruntime (CPU, batch 8), same run.

Model: the RIPE-MambaSpike backbone in its ``published`` configuration (``examples/ripe/model.py``
``published(steps=T)``: widths 32/64/128, 128x128 input, DS-MPA on, T = 10 by default), untrained
(weights drawn with a fixed seed; there is no published checkpoint). The weights are saved to a
temporary checkpoint so the PyTorch model and the compiled one are the same model.

1. Compile through spikec: ``compile_model`` with ``--passes default`` and ``--target onnx`` on a
   small verification batch (random binary events, as ``spikec compile`` draws them). This writes
   ``model.onnx`` (float64, spike-exact: the report's ``target.spike_exact``) from the *fused*
   deployed IR (RepConv branches fused, BN folded, TDM commuted into dual kernels).
2. Also export the same deployed IR as a float32 ONNX variant (native Conv / AveragePool; fast but
   not claimed exact: its spike mismatches against the float64 reference are counted and printed).
3. Time, on one batch-8 input ``[T, 8, 2, 128, 128]``: (a) PyTorch float32, the unfused
   training-form model in eval mode under ``torch.no_grad()``; (b) onnxruntime CPU running the
   float64 ``model.onnx``; (c) onnxruntime running the float32 variant. Warm-up once each, then
   alternating rounds a b c a b c ...; medians. Both runtimes use the same number of threads.

What is compared is the whole forward pass (input spikes to logits) of each: PyTorch float32
(unfused) vs ONNX float64 (the exact deployment artifact) — different precisions, stated on every
line — and PyTorch float32 vs ONNX float32 (same precision). The last line prints both speed-ups.

    .venv/bin/python benchmarks/bench_onnx.py            # T=10, batch 8, 128x128 (~2-4 min on 2 cores)
    .venv/bin/python benchmarks/bench_onnx.py --quick    # T=2, 3 rounds (about a minute)
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `spikec` without an install
RIPE = ROOT / "examples" / "ripe" / "model.py"
STEPS_ENV = "SPIKEC_BENCH_ONNX_STEPS"


def published_model():
    """Factory for the spikec loader: ``published(steps=T)`` with T from the environment (default 10)."""
    from spikec.app.loader import load_factory
    return load_factory(f"{RIPE}:published")(steps=int(os.environ.get(STEPS_ENV, "10")))


def median_ms(xs):
    return 1e3 * statistics.median(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10, help="T of the published model (default 10)")
    ap.add_argument("--batch", type=int, default=8, help="timed batch (default 8)")
    ap.add_argument("--verify-batch", type=int, default=1, help="batch of the spikec verification inputs")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timed rounds")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both runtimes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="T=2, 3 rounds (a smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.rounds = 2, 3
    os.environ[STEPS_ENV] = str(args.steps)

    import onnxruntime as ort

    print(f"RIPE published: widths 32/64/128, 128x128, T={args.steps}, DS-MPA on; untrained, seed {args.seed}; "
          f"torch {torch.__version__}, onnxruntime {ort.__version__}, {args.threads} thread(s); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (timings need an otherwise idle machine)")

    # the model: seeded weights, saved so the compiled and the timed PyTorch model are the same
    torch.manual_seed(args.seed)
    model = published_model().eval()
    work = Path(tempfile.mkdtemp(prefix="bench_onnx_"))
    try:
        run_benchmark(args, model, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_benchmark(args, model, work: Path):
    import onnxruntime as ort
    from spikec.app.driver import CompileOptions, compile_model, write_outdir
    from spikec.compiler.interpreter import run
    from spikec.targets.onnx import check_model_against, export

    torch.save(model.state_dict(), work / "weights.pt")

    # 1. compile through spikec -> model.onnx (float64), verified spike-exact on the small batch
    torch.set_num_threads(1)  # the float64 reference interpreter: one thread avoids OpenMP spin contention
    start = time.perf_counter()
    compiled = compile_model(CompileOptions(f"{Path(__file__).resolve()}:published_model",
                                            weights=str(work / "weights.pt"), batch=args.verify_batch,
                                            passes="default", target="onnx", seed=args.seed))
    out = write_outdir(work / "out", compiled)
    t = compiled.report["target"]
    print(f"spikec compile (passes {', '.join(p['name'] for p in compiled.report['passes'])}; verification batch "
          f"{args.verify_batch}): {time.perf_counter() - start:.1f} s, equivalent {compiled.report['equivalent']}")
    print(f"  model.onnx: {t['form']}, opset {t['opset']}, {t['dtype']}, {t['onnx_nodes']} nodes, "
          f"{t['bytes'] / 1e6:.1f} MB; spike_exact {t['spike_exact']} ({t['spikes_compared']:,} spikes over "
          f"{t['nodes_compared']} nodes, max rel diff {t['max_rel_diff']:.2g}, min firing margin "
          f"{t['min_firing_margin']:.2g})")
    graph, x_verify = compiled.graph, compiled.io["input"]
    ref = run(graph, x_verify, record="all")
    rates = [f"{n.name} {ref.values[n.name].mean():.3f}" for n in graph.nodes
             if n.op in ("csilif", "silif") and n.attrs.get("output", "spikes") == "spikes"]
    print(f"  spike rates on the verification batch: {', '.join(rates)}")

    # 2. the float32 variant of the same deployed IR, checked against the float64 reference
    f32 = export(graph, args.steps, dtype="float32")
    r32 = check_model_against(f32, graph, x_verify, ref)
    print(f"  float32 variant: {r32['spike_mismatches']:,} of {r32['spikes_compared']:,} spikes differ from the "
          f"float64 reference ({100 * r32['spike_mismatches'] / max(1, r32['spikes_compared']):.3f}%), "
          f"max rel diff {r32['max_rel_diff']:.2g}")
    del ref

    # 3. time the three on one batch
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed + 1)
    x = (rng.random((args.steps, args.batch, *model.input_shape)) < 0.3)
    xt = torch.as_tensor(x, dtype=torch.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    s64 = ort.InferenceSession(str(out / "model.onnx"), so, providers=["CPUExecutionProvider"])
    s32 = ort.InferenceSession(f32.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds64 = {s64.get_inputs()[0].name: x.astype(np.float64)}
    feeds32 = {s32.get_inputs()[0].name: x.astype(np.float32)}

    def torch_run():
        with torch.no_grad():
            return model(xt).numpy()
    runs = {"torch": torch_run, "onnx64": lambda: s64.run(None, feeds64)[0], "onnx32": lambda: s32.run(None, feeds32)[0]}
    results = {k: f() for k, f in runs.items()}  # warm-up
    scale = np.abs(results["onnx64"]).max()
    print(f"timed input [T={args.steps}, B={args.batch}, 2, 128, 128]; outputs vs float64 ONNX: PyTorch float32 max "
          f"abs diff {np.abs(results['torch'] - results['onnx64']).max():.2g}, float32 ONNX "
          f"{np.abs(results['onnx32'] - results['onnx64']).max():.2g} (output scale {scale:.3g})")
    times = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, f in runs.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    med = {k: median_ms(v) for k, v in times.items()}
    print(f"  PyTorch float32, unfused training-form model (eval, no_grad): {med['torch']:9.1f} ms  (median of "
          f"{args.rounds})")
    print(f"  onnxruntime float64, fused model.onnx (spike-exact):           {med['onnx64']:9.1f} ms")
    print(f"  onnxruntime float32, fused variant (not exact):                {med['onnx32']:9.1f} ms")
    print(f"speed-up of the fused ONNX model over unfused PyTorch float32 (batch {args.batch}, T={args.steps}, "
          f"{args.threads} thread(s)): float64 model.onnx {med['torch'] / med['onnx64']:.2f}x, "
          f"float32 variant {med['torch'] / med['onnx32']:.2f}x")


if __name__ == "__main__":
    main()
