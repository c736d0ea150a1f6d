"""Forward latency of the RIPE backbone's training graph vs its RepConv-fused graph (PyTorch, CPU).

Both models are the published-width backbone of ``examples/ripe/model.py`` (channels 32, 64, 128,
DS-MPA on). The fused model is the *same* model (a deep copy) in which every ``snn.RepConv`` is
replaced by one ``nn.Conv2d(c_in, c_out, 3, stride, padding=1, bias=True)`` whose weight and bias
come from spikec itself: each unit is traced with ``spikec.compiler.frontend.trace`` and rewritten
by ``spikec.passes.fuse_repconv.fuse_repconv``; the single conv2d node left holds ``W*`` and ``b*``
(passes.md, "RepConv branch fusion"). Everything else (entry BNTT, TDM, BNTT, CSiLIF/SiLIF, Delay,
DS-MPA, head) is shared, identical code.

Protocol: eval mode, ``torch.no_grad()``, float32, ``torch.set_num_threads(2)``; input
``[T, B, 2, H, W]`` random binary events. Equivalence checks first (per unit and whole model),
then warm-up, then alternating timed runs A B A B ... (``time.perf_counter``); the reported
speed-up is the median of the per-pair ratios. Then a per-category breakdown (module hooks) and
the conv-only speed-up (the RepConv units vs the fused convs on the same recorded activations),
with the Amdahl prediction for the whole model. The last line printed is the whole-model ratio.

    .venv/bin/python benchmarks/bench_fusion.py            # T=16, batch 8, 128x128 (~4-5 min on 2 cores)
    .venv/bin/python benchmarks/bench_fusion.py --quick    # T=4, batch 2, 64x64 (seconds)
"""
import argparse
import copy
import importlib.util
import os
import platform
import statistics
import sys
import time
from collections import defaultdict

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # `spikec` without an install

import spikec.nn as snn  # noqa: E402
from spikec.compiler.frontend import trace  # noqa: E402
from spikec.passes.fuse_repconv import fuse_repconv  # noqa: E402


def load_ripe_model():
    spec = importlib.util.spec_from_file_location("ripe_model", os.path.join(ROOT, "examples", "ripe", "model.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- the fused unit ---------------------------------------------------------------------
class FusedRepConv(nn.Module):
    """One 3x3 conv with bias standing in for a RepConv; ``[T, B, C, H, W]`` in and out, like RepConv."""

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        t, b = x.shape[:2]
        y = self.conv(x.flatten(0, 1))
        return y.reshape(t, b, *y.shape[1:])


class _Unit(nn.Module):
    """The small wrapper traced by spikec: just the RepConv."""

    def __init__(self, rep):
        super().__init__()
        self.rep = rep

    def forward(self, x):
        return self.rep(x)


def fuse_with_spikec(rep: snn.RepConv) -> FusedRepConv:
    """Trace the unit, run spikec's fuse_repconv pass, and read W*, b* off the one conv2d node left."""
    c_in = rep.conv3x3[0].in_channels
    c_out = rep.conv3x3[0].out_channels
    stride = rep.conv3x3[0].stride
    graph = trace(_Unit(copy.deepcopy(rep)), (c_in, 8, 8), input_kind="real")
    result = fuse_repconv(graph)
    assert not result.skipped, f"fuse_repconv refused: {result.skipped}"
    convs = [n for n in result.graph.nodes if n.op == "conv2d"]
    others = [n for n in result.graph.nodes if n.op not in ("input", "conv2d")]
    assert len(convs) == 1 and not others, [(n.name, n.op) for n in result.graph.nodes]
    node = convs[0]
    assert tuple(node.attrs["stride"]) == tuple(stride) and tuple(node.attrs["padding"]) == (1, 1)
    conv = nn.Conv2d(c_in, c_out, 3, stride, padding=1, bias=True)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(node.params["weight"], dtype=torch.float32))
        conv.bias.copy_(torch.tensor(node.params["bias"], dtype=torch.float32))
    return FusedRepConv(conv)


def build_fused(model: nn.Module) -> tuple[nn.Module, list[tuple[str, snn.RepConv, FusedRepConv]]]:
    """A deep copy of ``model`` with every RepConv replaced by its fused conv; also the (name, rep, fused) list."""
    fused_model = copy.deepcopy(model)
    units = []
    for name, module in list(fused_model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, snn.RepConv):
                fused = fuse_with_spikec(child)
                setattr(module, child_name, fused)
                full = f"{name}.{child_name}" if name else child_name
                units.append((full, model.get_submodule(full), fused))
    assert not any(isinstance(m, snn.RepConv) for m in fused_model.modules())
    return fused_model, units


def randomize_bn(model: nn.Module, gen: torch.Generator) -> None:
    """Non-trivial BN statistics and affine parameters in every RepConv branch, so fusion is tested for real."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(0.5 + torch.rand(c, generator=gen))
                m.bias.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_var.copy_(0.5 + 1.5 * torch.rand(c, generator=gen))


def calibrate_bntt(model: nn.Module, x: torch.Tensor) -> None:
    """Set every BNTT's running statistics to the batch statistics of one forward on ``x``.

    The untrained model with default statistics is nearly silent after stage 1; calibrated, each
    BNTT output is ~N(0, 1) per step and channel and every neuron layer spikes, so the whole-model
    equivalence check exercises every unit. (Dense CPU latency does not depend on the spike rate.)
    """
    bntts = [m for m in model.modules() if isinstance(m, snn.BNTT)]
    model.eval()
    for m in bntts:
        m.train()
        m.momentum = 1.0
    with torch.no_grad():
        model(x)
    for m in bntts:
        m.momentum = 0.1
    model.eval()


def neuron_io(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """The output of ``model`` and, per neuron, (input, spikes) during that forward."""
    seen, handles = {}, []
    for name, m in model.named_modules():
        if isinstance(m, (snn.CSiLIF, snn.SiLIF)):
            handles.append(m.register_forward_hook(
                lambda mod, inp, out, name=name: seen.__setitem__(name, (inp[0], out[0] if isinstance(out, tuple) else out))))
    try:
        y = model(x)
    finally:
        for h in handles:
            h.remove()
    return y, seen


def events(shape, density, gen):
    return (torch.rand(shape, generator=gen) < density).float()


# -- analytic cost ----------------------------------------------------------------------
def conv_macs(rep: snn.RepConv, h: int, w: int, n: int) -> tuple[int, int]:
    """(training-form MACs, fused MACs) of one unit on ``n`` images of ``h x w`` (convs only)."""
    c3 = rep.conv3x3[0]
    c_in, c_out, s = c3.in_channels, c3.out_channels, c3.stride[0]
    ho, wo = (h + 2 - 3) // s + 1, (w + 2 - 3) // s + 1
    out = ho * wo * n
    train = c_in * c_out * (9 + 1 + 3 + 3) * out          # 3x3, 1x1, 1x3, 3x1
    train += c_in * c_out * h * w * n + c_out * c_out * 9 * out   # seq: 1x1 at input res, then 3x3
    return train, c_in * c_out * 9 * out


# -- timing -----------------------------------------------------------------------------
def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def alternate(fa, fb, warmup: int, runs: int):
    """Warm up, then A B A B ...; returns (times A, times B, per-pair ratios A/B)."""
    for _ in range(warmup):
        fa()
        fb()
    ta, tb = [], []
    for _ in range(runs):
        ta.append(timed(fa))
        tb.append(timed(fb))
    return ta, tb, [a / b for a, b in zip(ta, tb)]


CATEGORIES = [  # (label, module types): the top-level building blocks of the backbone
    ("RepConv units", (snn.RepConv,)),
    ("fused 3x3 convs", (FusedRepConv,)),
    ("neurons (CSiLIF/SiLIF)", (snn.CSiLIF, snn.SiLIF)),
    ("BNTT", (snn.BNTT,)),
    ("DS-MPA", (snn.DSMPA,)),
    ("TDM", (snn.TDM,)),
    ("Delay", (snn.Delay,)),
    ("head", (snn.TimeDistributed,)),
]


def breakdown(model: nn.Module, x: torch.Tensor, runs: int) -> tuple[dict, float]:
    """Median seconds per category over ``runs`` forwards (via forward hooks), and the median total."""
    acc, handles, start = defaultdict(float), [], {}

    def label_of(m):
        for label, types in CATEGORIES:
            if isinstance(m, types):
                return label
        return None

    for m in model.modules():
        label = label_of(m)
        if label is None:
            continue
        handles.append(m.register_forward_pre_hook(lambda mod, inp: start.__setitem__(id(mod), time.perf_counter())))
        handles.append(m.register_forward_hook(
            lambda mod, inp, out, label=label: acc.__setitem__(label, acc[label] + time.perf_counter() - start[id(mod)])))
    per_run, totals = defaultdict(list), []
    try:
        for _ in range(runs):
            acc.clear()
            totals.append(timed(lambda: model(x)))
            for label, _types in CATEGORIES:
                if label in acc:
                    per_run[label].append(acc[label])
    finally:
        for h in handles:
            h.remove()
    return {k: statistics.median(v) for k, v in per_run.items()}, statistics.median(totals)


def record_unit_inputs(model: nn.Module, x: torch.Tensor, names) -> dict:
    """The input each named RepConv sees during one forward of ``model``."""
    seen, handles = {}, []
    for name in names:
        handles.append(model.get_submodule(name).register_forward_pre_hook(
            lambda mod, inp, name=name: seen.__setitem__(name, inp[0])))
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return seen


# -- main -------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke test: T=4, batch 2, 64x64, few runs")
    p.add_argument("--runs", type=int, default=None, help="timed A/B pairs for the whole model (default 15; quick 3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--density", type=float, default=0.1, help="fraction of input events that are 1")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    if args.quick:
        steps, batch, hw = 4, 2, 64
        runs, warmup, conv_runs, prof_runs = args.runs or 3, 1, 3, 1
    else:
        steps, batch, hw = 16, 8, 128
        runs, warmup, conv_runs, prof_runs = args.runs or 15, 2, 10, 3

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    ripe = load_ripe_model()
    if hw == 128:
        train = ripe.published(steps=steps)
    else:
        train = ripe.RipeBackbone(channels=(32, 64, 128), steps=steps, classes=4, dsmpa=True, input_hw=(hw, hw))
    randomize_bn(train, gen)
    calibrate_bntt(train, events((steps, batch, 2, hw, hw), args.density, gen))
    train.eval()
    fused, units = build_fused(train)
    fused.eval()

    n_train = sum(p.numel() for p in train.parameters())
    n_fused = sum(p.numel() for p in fused.parameters())
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"torch.get_num_threads() = {torch.get_num_threads()}")
    print(f"model: RIPE backbone, published widths (32, 64, 128), DS-MPA on; T = {steps}, batch {batch}, "
          f"{hw}x{hw}, input [{steps}, {batch}, 2, {hw}, {hw}] binary events (density {args.density})")
    print(f"parameters: training graph {n_train:,}, fused graph {n_fused:,}; "
          f"{len(units)} RepConv units fused by spikec.passes.fuse_repconv")

    with torch.no_grad():
        # 1. equivalence: every unit on a real-valued input, then the whole model on events
        worst = 0.0
        for name, rep, f in units:
            c_in = rep.conv3x3[0].in_channels
            xu = torch.randn(2, 2, c_in, 16, 16, generator=gen)
            ref, got = rep(xu), f(xu)
            rel = ((ref - got).abs().max() / ref.abs().max()).item()
            worst = max(worst, rel)
        print(f"check, per unit (float32, random real input): max |RepConv - fused| / max |RepConv| = {worst:.2e}")
        assert worst < 1e-5, worst
        xs = events((steps, 2, 2, 32, 32), args.density, gen)
        for dtype in (torch.float32, torch.float64):
            ref, io_a = neuron_io(copy.deepcopy(train).to(dtype), xs.to(dtype))
            got, io_b = neuron_io(copy.deepcopy(fused).to(dtype), xs.to(dtype))
            rel = ((ref - got).abs().max() / ref.abs().max()).item()
            rel_in = max(((io_a[n][0] - io_b[n][0]).abs().max() / io_a[n][0].abs().max()).item() for n in io_a)
            flips = sum(int((io_a[n][1] != io_b[n][1]).sum()) for n in io_a)
            total = sum(io_a[n][1].numel() for n in io_a)
            if dtype == torch.float32:
                rates = ", ".join(f"{n.replace('.neuron', '.n')} {io_a[n][1].mean().item():.2f}" for n in io_a)
                print(f"  spike rates (training model, check input [{steps}, 2, 2, 32, 32]): {rates}")
            print(f"check, whole model ({str(dtype)[6:]}, eval): max |training - fused| / max |training| = {rel:.2e} "
                  f"(outputs), {rel_in:.2e} (worst neuron input); spikes differing {flips} of {total:,}")
            assert rel < (1e-4 if dtype == torch.float32 else 1e-10), rel

        # 2. whole-model latency, alternating A B A B ...
        x = events((steps, batch, 2, hw, hw), args.density, gen)
        print(f"timing: {warmup} warm-up pair(s), then {runs} alternating pairs (training, fused) ...", flush=True)
        t0 = time.perf_counter()
        ta, tb, ratios = alternate(lambda: train(x), lambda: fused(x), warmup, runs)
        med_a, med_b, med_r = statistics.median(ta), statistics.median(tb), statistics.median(ratios)
        print(f"  training graph: median {med_a:.3f} s  (min {min(ta):.3f}, max {max(ta):.3f})")
        print(f"  fused graph:    median {med_b:.3f} s  (min {min(tb):.3f}, max {max(tb):.3f})")
        print(f"  per-pair ratios: min {min(ratios):.3f}, median {med_r:.3f}, max {max(ratios):.3f} "
              f"({time.perf_counter() - t0:.0f} s)")

        # 3. where the time goes
        print(f"breakdown (forward hooks, median of {prof_runs} forwards each; seconds and share of the forward):")
        bd_a, tot_a = breakdown(train, x, prof_runs)
        bd_b, tot_b = breakdown(fused, x, prof_runs)
        print(f"  {'':24s} {'training':>16s} {'fused':>16s}")
        for label, _types in CATEGORIES:
            if label in bd_a or label in bd_b:
                a, b = bd_a.get(label), bd_b.get(label)
                fa = f"{a:7.3f} ({100 * a / tot_a:4.1f}%)" if a is not None else ""
                fb = f"{b:7.3f} ({100 * b / tot_b:4.1f}%)" if b is not None else ""
                print(f"  {label:24s} {fa:>16s} {fb:>16s}")
        rest_a, rest_b = tot_a - sum(bd_a.values()), tot_b - sum(bd_b.values())
        print(f"  {'other (entry BNTT incl.)':24s} {rest_a:7.3f} ({100 * rest_a / tot_a:4.1f}%)  "
              f"{rest_b:7.3f} ({100 * rest_b / tot_b:4.1f}%)")
        print(f"  {'total':24s} {tot_a:7.3f}          {tot_b:7.3f}")

        # 4. conv-only speed-up on the activations the units really see
        seen = record_unit_inputs(train, x, [n for n, _, _ in units])
        per_unit = {n: ([], []) for n, _, _ in units}

        def run_units(which):
            for name, rep, f in units:
                m = rep if which == 0 else f
                per_unit[name][which].append(timed(lambda: m(seen[name])))

        ca, cb, cratios = alternate(lambda: run_units(0), lambda: run_units(1), 1, conv_runs)
        for lst in per_unit.values():  # drop the warm-up calls
            del lst[0][0], lst[1][0]
        macs_a = macs_b = 0
        print(f"conv-only (the {len(units)} units on the recorded activations; warm-up 1, {conv_runs} pairs):")
        print(f"  {'unit':12s} {'in':>18s} {'training s':>11s} {'fused s':>9s} {'speed-up':>9s} {'MAC ratio':>10s}")
        for name, rep, f in units:
            xi = seen[name]
            ma, mb = conv_macs(rep, xi.shape[3], xi.shape[4], xi.shape[0] * xi.shape[1])
            macs_a, macs_b = macs_a + ma, macs_b + mb
            a, b = statistics.median(per_unit[name][0]), statistics.median(per_unit[name][1])
            shape = "x".join(str(d) for d in xi.shape[2:])
            print(f"  {name:12s} {shape:>18s} {a:11.4f} {b:9.4f} {a / b:8.2f}x {ma / mb:9.2f}x")
        conv_a, conv_b, conv_r = statistics.median(ca), statistics.median(cb), statistics.median(cratios)
        print(f"  all units: training {conv_a:.3f} s, fused {conv_b:.3f} s, conv-only speed-up {conv_r:.2f}x "
              f"(conv MACs {macs_a / 1e9:.1f} G -> {macs_b / 1e9:.1f} G, {macs_a / macs_b:.2f}x)")
        share = conv_a / med_a
        amdahl = 1 / ((1 - share) + share / conv_r)
        print(f"Amdahl: RepConv units are {100 * share:.1f}% of the training forward; with a {conv_r:.2f}x conv "
              f"speed-up the whole model should gain {amdahl:.2f}x (measured {med_r:.2f}x); "
              f"the rest ({med_a - conv_a:.3f} s) is identical in both graphs")

    print(f"fusion speed-up (training graph / fused graph): {med_r:.2f}x")


if __name__ == "__main__":
    main()
