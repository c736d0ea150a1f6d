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

4. ``model.onnx`` at T=256 vs T=8 (issue 30), on the digits example (``examples/digits``, its checkpoint): the
   model.onnx the target writes (the loop form: one Scan around the step graph) and, beside it, the unrolled
   form it replaced, exported at T=8 and T=256 in the same run; nodes (the Scan's body included), and the CPU
   time (``time.process_time``, one onnxruntime thread) of building an onnxruntime session, in alternating
   rounds (medians); then the ONNX target itself (export + checks + the step model) on T=256 inputs, CPU
   seconds. The last line prints the T=256 / T=8 ratios of nodes and session build.

    .venv/bin/python benchmarks/bench_onnx.py            # T=10, batch 8, 128x128 (~2-4 min on 2 cores)
    .venv/bin/python benchmarks/bench_onnx.py --quick    # T=2, 3 rounds (about a minute)
    .venv/bin/python benchmarks/bench_onnx.py --t-scaling-only   # part 4 only (about a minute)
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
    ap.add_argument("--t-scaling-only", action="store_true", help="only model.onnx at T=256 vs T=8 (part 4)")
    args = ap.parse_args()
    if args.t_scaling_only:
        t_scaling(args.rounds)
        return
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
    t_scaling(args.rounds)


def run_benchmark(args, model, work: Path):
    import onnxruntime as ort
    from spikec.app.driver import CompileOptions, compile_model, write_outdir
    from spikec.core.interpreter import run
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



DIGITS = ROOT / "examples" / "digits"


def t_scaling(rounds: int, small: int = 8, large: int = 256):
    """Part 4: model.onnx at T=``large`` vs T=``small``, loop form (written) and unrolled (before), side by side."""
    import onnx
    import onnxruntime as ort
    from spikec.app.driver import CompileOptions, compile_model
    from spikec.core.interpreter import run
    from spikec.targets import get_target
    from spikec.targets.onnx import check_model_against, export
    from spikec.targets.onnx.loop import node_count

    torch.set_num_threads(1)
    c = compile_model(CompileOptions(f"{DIGITS / 'model.py'}:small", weights=str(DIGITS / "checkpoint.pt"),
                                     inputs=str(DIGITS / "inputs.npz"), target="none"))
    graph = c.graph
    models = {(form, T): export(graph, T, form=form).SerializeToString()
              for form in ("loop", "unrolled") for T in (small, large)}
    nodes = {k: node_count(onnx.load_from_string(v)) for k, v in models.items()}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1

    def build(data):
        t0 = time.process_time()
        ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        return time.process_time() - t0
    build(models[("loop", small)])   # warm-up: onnxruntime's one-time initialization is no model's cost
    times = {k: [] for k in models}
    for _ in range(max(3, rounds)):
        for k, data in models.items():
            times[k].append(build(data))
    ms = {k: median_ms(v) for k, v in times.items()}
    print(f"model.onnx at T={large} vs T={small} (digits example, conv-LIF-conv-LIF-linear; session build CPU, "
          f"1 onnxruntime thread, median of {max(3, rounds)} alternating rounds):")
    for form in ("unrolled", "loop"):
        label = "unrolled (before)" if form == "unrolled" else "loop (written)   "
        print(f"  {label}: nodes {nodes[(form, small)]:,} -> {nodes[(form, large)]:,}; session build "
              f"{ms[(form, small)]:.1f} ms -> {ms[(form, large)]:.1f} ms")
    x = (np.random.default_rng(0).random((large, 4, 1, 8, 8)) < 0.3).astype(np.float64)
    sessions = {form: ort.InferenceSession(models[(form, large)], so, providers=["CPUExecutionProvider"])
                for form in ("loop", "unrolled")}
    runs = {form: [] for form in sessions}
    for _ in range(max(3, rounds)):
        for form, sess in sessions.items():
            t0 = time.process_time()
            sess.run(None, {"input": x})
            runs[form].append(time.process_time() - t0)
    print(f"  one forward at T={large}, batch 4: loop {median_ms(runs['loop']):.1f} ms, unrolled "
          f"{median_ms(runs['unrolled']):.1f} ms CPU")
    ref = run(graph, x, record="all")
    t0 = time.process_time()
    res = get_target("onnx")(graph, x, ref, {})
    t_loop = time.process_time() - t0
    t0 = time.process_time()
    old = check_model_against(export(graph, large, form="unrolled"), graph, x, ref)
    t_old = time.process_time() - t0
    print(f"  the ONNX target on T={large} inputs (batch 4): {t_loop:.1f} s CPU, form {res.report['form']}, spike_exact "
          f"{res.report['spike_exact']} (with the step model's check); the unrolled export + check alone: "
          f"{t_old:.1f} s CPU, spike_exact {old['spike_exact']}")
    print(f"ONNX at T={large} vs T={small}: model.onnx (loop) nodes {nodes[('loop', large)] / nodes[('loop', small)]:.2f}x, "
          f"session build {ms[('loop', large)] / ms[('loop', small)]:.2f}x CPU (unrolled: nodes "
          f"{nodes[('unrolled', large)] / nodes[('unrolled', small)]:.1f}x, session build "
          f"{ms[('unrolled', large)] / ms[('unrolled', small)]:.1f}x)")


if __name__ == "__main__":
    main()
