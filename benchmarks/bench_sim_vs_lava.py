"""Integer reference (spikec's int64 interpreter) vs Lava's fixed-point simulation, same network, same inputs.

Network (``--network``): ``digits`` (default), the digits demo (``examples/digits/model.py:small`` with its
checkpoint), quantized for Loihi 2 by the Lava target (conv -> soft-reset LIF -> conv+avgpool -> hard-reset
LIF -> linear read-out), inputs ``examples/digits/inputs.npz`` (T = 8, B = 16); or ``ripe``, the RIPE-MambaSpike
example (CSiLIF/SiLIF custom processes, TDM dual kernels with delays, DS-MPA and BNTT on host partitions),
inputs ``examples/ripe/inputs.npz`` (T = 8, B = 8). Inputs are repeated ``--repeat`` times along the batch.

Protocol: the two runs must be identical first (every spike, every read-out value, final states,
with the per-layer Lava latency accounted for: ``spikec.targets.lava.compare.compare``), else the
script exits 1. Timings on this machine (2 cores): the integer reference is the best of 3 runs
(``time.perf_counter``) of ``interpreter.run`` on the quantized graph (all nodes recorded, as
verification needs); Lava is the wall time of ``run`` (``RunSteps(T + latency)``,
``Loihi2SimCfg(select_tag="fixed_pt")``) excluding process construction, which is printed apart.
The last line printed is the ratio.

    .venv/bin/python benchmarks/bench_sim_vs_lava.py            # B = 16
    .venv/bin/python benchmarks/bench_sim_vs_lava.py --repeat 4 # B = 64
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=1, help="repeat the shipped samples along the batch")
    ap.add_argument("--network", choices=("digits", "ripe"), default="digits")
    args = ap.parse_args()

    from spikec.app.driver import CompileOptions, compile_model
    from spikec.core.interpreter import run
    from spikec.targets.lava import deploy
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.ops import with_readouts
    from spikec.targets.lava.simulate import run_lava

    example = REPO / "examples" / args.network
    opts = CompileOptions(model=f"{example / 'model.py'}:small", weights=str(example / "checkpoint.pt"),
                          inputs=str(example / "inputs.npz"), target="none")
    compiled = compile_model(opts)
    x = np.tile(compiled.io["input"], (1, args.repeat, 1, 1, 1)).astype(np.int64)
    q, net, arrays = deploy(compiled.graph, x)
    graph = with_readouts(q.graph)
    inputs = {q.graph.inputs[0].name: x}

    ref_times = []
    for _ in range(3):
        start = time.perf_counter()
        trace = run(graph, inputs, integer=True)
        ref_times.append(time.perf_counter() - start)
    lava = run_lava(net, arrays, inputs)
    result = compare(net, trace, lava, x.shape[0])
    print(f"network      {', '.join(p['name'] + ':' + p['type'] for p in net['processes'])}")
    print(f"inputs       T={x.shape[0]} B={x.shape[1]} (Lava runs {lava['steps']} steps: {net['period']} per "
          f"physical step, deepest start {net['max_start']})")
    print(f"identical    {result['bit_exact']}: {result['spikes_compared']:,} spikes, "
          f"{result['values_compared']:,} read-out values, {result['states_compared']:,} final states")
    if not result["bit_exact"]:
        print(f"MISMATCH     {result['first_mismatches'][:3]}")
        sys.exit(1)
    ref = min(ref_times)
    print(f"reference    {ref:.4f} s (int64 interpreter, best of 3)")
    print(f"lava         {lava['sim_seconds']:.3f} s simulation + {lava['build_seconds']:.3f} s building processes")
    print(f"integer reference faster than Lava's simulation by {lava['sim_seconds'] / ref:.1f} x")


if __name__ == "__main__":
    main()
