"""Core placement of SEW-ResNet-18 on Loihi 2: greedy per-layer split vs the METIS plan (spikec.targets.lava.cores).

Workload: ``examples/sew_resnet/model.py:sew_resnet18`` (untrained, BN calibrated; 3 x 224 x 224, T = 4, 1000
classes), compiled by ``spikec.compile(..., targets="none")``, quantized and lowered for Lava by
``spikec.targets.lava.deploy`` (no Lava run), its integer reference run by spikec's interpreter on ``--samples``
random binary inputs (density 0.3, seed 0) for the spike counts. Both placements use the same per-core pieces
(the split is the same) and one core per piece; the greedy one fills cores and chips in network order (Lava's
per-layer partitioning), the plan assigns chips by METIS minimising the inter-chip spikes per inference.

Prints cores, chips, utilisation and intra-core / inter-core / inter-chip spikes per inference for both, the
CPU seconds and peak memory, and LAST the ratio of inter-chip traffic, greedy / planned.

    .venv/bin/python benchmarks/bench_placement.py             # 224 x 224, T = 4, 1 sample (about 2 min, 5-6 GB)
    .venv/bin/python benchmarks/bench_placement.py --quick     # 64 x 64, T = 4
"""
import argparse
import importlib.util
import resource
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _model(size: int, steps: int):
    spec = importlib.util.spec_from_file_location("sew_resnet_model", ROOT / "examples" / "sew_resnet" / "model.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.sew_resnet18(steps=steps, image_size=size)


def spike_counts(size: int, steps: int, samples: int):
    """``(network, arrays, spikes per neuron per inference)`` of the deployment, the trace freed."""
    import spikec
    from spikec.core.interpreter import run
    from spikec.targets.lava import deploy
    from spikec.targets.lava.cores import populations
    from spikec.targets.lava.cores.network import spike_counts as counts_of
    from spikec.targets.lava.limits import int_inputs
    from spikec.targets.lava.ops import with_readouts
    c = spikec.compile(_model(size, steps), batch=1, targets="none", probes=False)
    x = (np.random.default_rng(0).random((steps, samples, 3, size, size)) < 0.3).astype(np.float64)
    q, net, arrays = deploy(c.graph, x)
    trace = run(with_readouts(q.graph), int_inputs(q.graph, x), integer=True)
    pops = populations(net, arrays)
    counts = counts_of(trace.values, pops)
    return net, arrays, counts


def _row(name: str, cores: int, chips: int, t: dict) -> str:
    return (f"{name:<8} {cores:>6} {chips:>6} {t['intra_core']:>14,.0f} {t['inter_core_same_chip']:>14,.0f} "
            f"{t['inter_chip']:>14,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="64 x 64 inputs")
    a = ap.parse_args()
    size = 64 if a.quick else a.size
    from spikec.targets.lava.cores import LOIHI2, plan_placement
    t0 = time.process_time()
    net, arrays, counts = spike_counts(size, a.steps, a.samples)
    t1 = time.process_time()
    mem_run = _peak_gb()
    plan = plan_placement((net, arrays), counts, LOIHI2)
    t2 = time.process_time()
    neurons = sum(p.neurons for p in plan.populations)
    print(f"SEW-ResNet-18, 3x{size}x{size}, T = {a.steps}, {a.samples} random input(s); {len(plan.populations)} "
          f"populations, {neurons:,} neurons, {sum(p.synapses for p in plan.pieces):,} synapses (per sample)")
    print(f"limits: {LOIHI2.neurons_per_core:,} neurons, {LOIHI2.synapses_per_core:,} synapses per core, "
          f"{LOIHI2.cores_per_chip} cores per chip (spikec/targets/lava/chip_limits.py)")
    print(f"compile + deploy + integer run: {t1 - t0:.1f} s CPU, peak {mem_run:.2f} GB; placement: "
          f"{t2 - t1:.1f} s CPU; peak memory of the whole run {_peak_gb():.2f} GB")
    print(f"{'':<8} {'cores':>6} {'chips':>6} {'intra-core':>14} {'inter-core':>14} {'inter-chip':>14}   "
          "(spikes per inference)")
    g = plan.greedy
    print(_row("greedy", g["cores"], g["chips"], g["traffic"]))
    print(_row("planned", plan.cores, plan.chips, plan.traffic))
    u = plan.utilisation()
    print(f"planned utilisation: neurons {u['neurons']:.1%}, synapses {u['synapses']:.1%} of the used cores; "
          f"cores per chip {u['cores_per_chip']}; {plan.partitioner}")
    planned = plan.traffic["inter_chip"]
    ratio = g["traffic"]["inter_chip"] / planned if planned else float("inf")
    print(f"inter-chip spike traffic greedy / planned: {ratio:.2f}x")


if __name__ == "__main__":
    main()
