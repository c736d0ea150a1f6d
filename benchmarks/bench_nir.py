"""The NIR target vs snnTorch's own NIR round trip, in one process, CPU time (issue 30).

For each network (snnTorch modules as its docs write them: ``nn.Sequential`` with ``snntorch.Leaky(init_hidden=
True)``, per-neuron parameters, seeded), on the same random binary inputs ``[T, B, ...]``:

* (a) **snnTorch's round trip**: ``snntorch.export_nir.export_to_nir(net, sample)``, ``nir.write``, ``nir.read``,
  ``snntorch.import_nir.import_from_nir``, then the imported module run over the T steps of the batch (what a user
  runs to see the file works: one importer, no comparison).
* (b) **spikec's NIR target** on the compiled graph (``spikec.targets.nir.nir_target``, as the driver calls it):
  the export, the HDF5 write and re-read, spikec's NIR interpreter in both of NIR's schemes, and every installed
  consumer that can run the file (snnTorch, Norse, Sinabs, SpikingJelly, Rockpool) over the batch, each compared
  spike by spike with the deployed graph. The compile itself is not timed (the target is).

Both are timed warm (imports and first calls done in an untimed round), ``time.process_time`` (all threads), in
alternating rounds; the last line is the median of the per-round ratios (b) / (a) over all networks.

    .venv/bin/python benchmarks/bench_nir.py            # 5 rounds
    .venv/bin/python benchmarks/bench_nir.py --rounds 9
"""
import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn


def _seeded(net: nn.Module, seed: int, gain: float) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * gain)
    return net.eval()


def _leaky(beta: float, shape, **kw):
    """snnTorch's Leaky with per-neuron parameters: with 0-d ones snnTorch 1.0's ``export_to_nir`` fails nir
    1.0.8's type inference ("type mismatch: ... -> 1.input: []")."""
    import snntorch.utils
    return snntorch.Leaky(beta=torch.full(shape, beta), threshold=torch.ones(shape), init_hidden=True, **kw)


def dense():
    net = nn.Sequential(nn.Linear(100, 64), _leaky(0.9, (64,)),
                        nn.Linear(64, 10), _leaky(0.8, (10,), output=True))
    return _seeded(net, 0, 0.3), (100,)


def conv():
    net = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), _leaky(0.9, (8, 16, 16)),
                        nn.Conv2d(8, 16, 3, stride=2, padding=1), _leaky(0.9, (16, 8, 8)),
                        nn.Flatten(), nn.Linear(16 * 8 * 8, 10), _leaky(0.8, (10,), output=True))
    return _seeded(net, 1, 0.3), (2, 16, 16)


NETWORKS = {"dense 100-64-10, T=25, B=16": (dense, 25, 16), "conv 2x16x16 -> 8 -> 16 -> 10, T=20, B=8": (conv, 20, 8)}


def snntorch_round_trip(net: nn.Module, x: np.ndarray, tmp: Path) -> np.ndarray:
    import nir
    import snntorch.utils
    from snntorch.export_nir import export_to_nir
    from snntorch.import_nir import import_from_nir
    graph = export_to_nir(net, torch.zeros(1, *x.shape[2:]), ignore_dims=[0])
    nir.write(tmp / "snntorch.nir", graph)
    imported = import_from_nir(nir.read(tmp / "snntorch.nir"))
    # nirtorch's Flatten flattens the batch too (NIR's shapes carry none): a flattening network runs one sample
    # at a time, as spikec's consumer check runs it
    per_sample = any(isinstance(m, nn.Flatten) for m in net.modules())
    outs = []
    with torch.no_grad():
        for b in (range(x.shape[1]) if per_sample else [slice(None)]):
            snntorch.utils.reset(imported)
            state, ys = None, []
            for t in range(x.shape[0]):
                y, state = imported(torch.as_tensor(x[t, b], dtype=torch.float32), state)
                ys.append(y)
            outs.append(torch.stack(ys))
    return torch.stack(outs, 1).numpy() if per_sample else outs[0].numpy()


def spikec_target(graph, x: np.ndarray, reference) -> dict:
    from spikec.targets.nir import nir_target
    return nir_target(graph, x, reference, {}).report


def _cpu(fn, *args):
    start = time.process_time()
    out = fn(*args)
    return time.process_time() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import spikec
    from spikec.core.interpreter import run
    print(f"NIR target vs snnTorch's export + import round trip, warm, CPU (process_time), 1 torch thread, "
          f"{args.rounds} alternating rounds")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, (factory, steps, batch) in NETWORKS.items():
            net, shape = factory()
            x = (np.random.default_rng(0).random((steps, batch, *shape)) < 0.3).astype(np.float64)
            compiled = spikec.compile(net, x, targets="none")
            graph = compiled.graph
            reference = run(graph, x)
            snntorch_round_trip(net, x, Path(tmp))          # warm-up: imports, first calls
            first = spikec_target(graph, x, reference)
            ran = sorted(k for k, v in first["consumers"].items() if v.get("ran"))
            a_s, b_s = [], []
            for _ in range(args.rounds):
                a, _ = _cpu(snntorch_round_trip, net, x, Path(tmp))
                b, rep = _cpu(spikec_target, graph, x, reference)
                a_s.append(a)
                b_s.append(b)
                ratios.append(b / a)
            print(f"{label}: snnTorch round trip {statistics.median(a_s) * 1e3:.0f} ms, spikec NIR target "
                  f"{statistics.median(b_s) * 1e3:.0f} ms (exact {rep['exact']}, consumers run and compared: "
                  f"{', '.join(ran) or 'none'}) | {statistics.median(b_s) / statistics.median(a_s):.2f}x")
    print(f"NIR target / snnTorch export + import round trip (CPU, median of {len(ratios)} rounds): "
          f"{statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
