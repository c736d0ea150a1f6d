"""Forward latency of the RIPE backbone's training graph vs its RepConv-fused graph (PyTorch, CPU).

Both models are the published-width backbone of ``examples/ripe/model.py`` (channels 32, 64, 128,
DS-MPA on). The fused model is the *same* model (a deep copy) in which every ``snn.RepConv`` is
replaced by one ``nn.Conv2d(c_in, c_out, 3, stride, padding=1, bias=True)`` whose weight and bias
come from spikec itself: each unit is traced with ``spikec.frontend.trace`` and rewritten
by ``spikec.passes.fuse_repconv.fuse_repconv``; the single conv2d node left holds ``W*`` and ``b*``
(passes.md, "RepConv branch fusion"). Everything else (entry BNTT, TDM, BNTT, CSiLIF/SiLIF, Delay,
DS-MPA, head) is shared, identical code.

Protocol: eval mode, ``torch.no_grad()``, float32, ``torch.set_num_threads(2)``; input
``[T, B, 2, H, W]`` random binary events. Equivalence checks first (per unit and whole model),
then warm-up, then alternating timed runs A B A B ... (``time.perf_counter``); the reported
speed-up is the median of the per-pair ratios. Then a per-category breakdown (module hooks) and
the conv-only speed-up (the RepConv units vs the fused convs on the same recorded activations),
with the Amdahl prediction for the whole model. The last line printed is the whole-model ratio.

Wall time, CPU time (user + sys of all threads), sys time and minor page faults are recorded for
every timed call. ``--omp-wait passive`` (the default) sets OMP_WAIT_POLICY=PASSIVE before torch is
imported: with libgomp's default spin-waiting, 2-thread timings collapse when the cores are shared
with other processes. ``--thp`` sets THP_MEM_ALLOC_ENABLE=1 (huge pages for torch's large CPU
allocations). See benchmarks/README.md for measured figures and their explanation.

    .venv/bin/python benchmarks/bench_fusion.py            # T=16, batch 8, 128x128 (~2.5 min on 2 idle cores)
    .venv/bin/python benchmarks/bench_fusion.py --quick    # T=4, batch 2, 64x64 (seconds)
"""
import argparse
import copy
import importlib.util
import os
import platform
import resource
import statistics
import sys
import time
from collections import defaultdict


def _pre_import_env(argv) -> str:
    """Apply ``--omp-wait`` and ``--thp`` before torch is loaded (libgomp and c10 read these variables once)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--omp-wait", choices=("passive", "active", "env"), default="passive")
    pre.add_argument("--thp", action="store_true")
    known = pre.parse_known_args(argv)[0]
    if known.thp:
        os.environ["THP_MEM_ALLOC_ENABLE"] = "1"
    choice = known.omp_wait
    if choice != "env":
        if "torch" in sys.modules and os.environ.get("OMP_WAIT_POLICY", "").lower() != choice:
            return f"{os.environ.get('OMP_WAIT_POLICY', 'unset')} (torch was imported before --omp-wait could apply)"
        os.environ["OMP_WAIT_POLICY"] = choice.upper()
    return os.environ.get("OMP_WAIT_POLICY", "unset (libgomp default: spin, then sleep)")


OMP_WAIT = _pre_import_env(sys.argv[1:])

import torch  # noqa: E402
from torch import nn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # `spikec` without an install

import spikec.nn as snn  # noqa: E402
from spikec.frontend import trace  # noqa: E402
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
def clock() -> tuple[float, float, float, int]:
    """(wall s, CPU s = user + sys of all threads of this process, sys s, minor page faults)."""
    r = resource.getrusage(resource.RUSAGE_SELF)   # microsecond resolution (os.times() ticks at 10 ms)
    return time.perf_counter(), r.ru_utime + r.ru_stime, r.ru_stime, r.ru_minflt


def timed(fn) -> tuple:
    """(wall s, CPU s, sys s, minor page faults) spent in ``fn()``."""
    a = clock()
    fn()
    b = clock()
    return tuple(y - x for x, y in zip(a, b))


def alternate(fa, fb, warmup: int, runs: int):
    """Warm up, then A B A B ...; returns the (wall, CPU, sys, faults) samples of A and of B, in run order."""
    for _ in range(warmup):
        fa()
        fb()
    sa, sb = [], []
    for _ in range(runs):
        sa.append(timed(fa))
        sb.append(timed(fb))
    return sa, sb


def med(samples, k=0):
    return statistics.median(s[k] for s in samples)


def pair_ratio(sa, sb, k=0):
    return statistics.median(a[k] / b[k] for a, b in zip(sa, sb))


CATEGORIES = [  # (label, module types): the top-level building blocks of the backbone
    ("RepConv units", (snn.RepConv,)),
    ("fused 3x3 convs", (FusedRepConv,)),
    ("neurons (CSiLIF/SiLIF)", (snn.CSiLIF, snn.SiLIF)),
    ("BNTT (incl. entry)", (snn.BNTT,)),
    ("DS-MPA", (snn.DSMPA,)),
    ("TDM", (snn.TDM,)),
    ("Delay", (snn.Delay,)),
    ("head", (snn.TimeDistributed,)),
]


def breakdown(model: nn.Module, x: torch.Tensor, runs: int) -> tuple[dict, tuple]:
    """Per category, the median (wall, CPU) seconds over ``runs`` forwards (forward hooks); and the median total."""
    acc, handles, start = {}, [], {}

    def label_of(m):
        for label, types in CATEGORIES:
            if isinstance(m, types):
                return label
        return None

    def pre(mod, inp):
        start[id(mod)] = clock()

    def post(mod, inp, out, label):
        now, then = clock(), start[id(mod)]
        w, c = acc.get(label, (0.0, 0.0))
        acc[label] = (w + now[0] - then[0], c + now[1] - then[1])

    for m in model.modules():
        label = label_of(m)
        if label is not None:
            handles.append(m.register_forward_pre_hook(pre))
            handles.append(m.register_forward_hook(lambda mod, inp, out, label=label: post(mod, inp, out, label)))
    per_run, totals = defaultdict(list), []
    try:
        for _ in range(runs):
            acc.clear()
            totals.append(timed(lambda: model(x)))
            for label, v in acc.items():
                per_run[label].append(v)
    finally:
        for h in handles:
            h.remove()
    return {k: (med(v, 0), med(v, 1)) for k, v in per_run.items()}, (med(totals, 0), med(totals, 1))


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


OP_GROUPS = (("conv", "convolution"), ("batch_norm", "batch_norm"), ("add", "add"), ("avg_pool", "avg_pool"))


def op_profile(fn) -> dict:
    """Self CPU seconds and call counts of ``fn()`` per aten op group (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    out = defaultdict(lambda: [0.0, 0])
    for e in prof.key_averages():
        group = next((g for g, key in OP_GROUPS if key in e.key), "other")
        out[group][0] += e.self_cpu_time_total / 1e6
        if group != "other" and e.key.startswith("aten::") and e.key.endswith(("mkldnn_convolution",
                "native_batch_norm", "add", "avg_pool2d", "_slow_conv2d_forward", "thnn_conv2d")):
            out[group][1] += e.count
    return dict(out)


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


# -- main -------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke test: T=4, batch 2, 64x64, few runs")
    p.add_argument("--runs", type=int, default=None, help="timed A/B pairs for the whole model (default 10; quick 3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--density", type=float, default=0.1, help="fraction of input events that are 1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--omp-wait", choices=("passive", "active", "env"), default="passive",
                   help="OMP_WAIT_POLICY for torch's OpenMP threads (default passive: robust when the cores are "
                        "shared with other processes; 'env' leaves the environment alone)")
    p.add_argument("--thp", action="store_true",
                   help="set THP_MEM_ALLOC_ENABLE=1: torch's CPU allocator asks for transparent huge pages, which "
                        "cuts the page faults of the large fresh activations by 1-2 orders of magnitude")
    args = p.parse_args(argv)

    if args.quick:
        steps, batch, hw = 4, 2, 64
        runs, warmup, conv_runs, prof_runs = args.runs or 3, 1, 3, 1
    else:
        steps, batch, hw = 16, 8, 128
        runs, warmup, conv_runs, prof_runs = args.runs or 10, 1, 6, 2

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
    print(f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"torch.get_num_threads() = {torch.get_num_threads()}, OMP_WAIT_POLICY {OMP_WAIT}, "
          f"THP_MEM_ALLOC_ENABLE {os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}, load average {load()}")
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
            worst = max(worst, ((ref - got).abs().max() / ref.abs().max()).item())
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
        print(f"timing: {warmup} warm-up pair(s), then {runs} alternating pairs (training, fused); "
              f"load average {load()} ...", flush=True)
        t0 = time.perf_counter()
        sa, sb = alternate(lambda: train(x), lambda: fused(x), warmup, runs)
        for label, ss in (("training graph", sa), ("fused graph", sb)):
            print(f"  {label:15s} wall median {med(ss):7.3f} s (min {min(s[0] for s in ss):.3f}, "
                  f"max {max(s[0] for s in ss):.3f});  CPU median {med(ss, 1):7.3f} s, of which sys {med(ss, 2):.3f}; "
                  f"CPU/wall {med(ss, 1) / med(ss):.2f}; {med(ss, 3) / 1e3:,.0f} k minor page faults")
        wall_ratios = sorted(a[0] / b[0] for a, b in zip(sa, sb))
        ratio = pair_ratio(sa, sb)
        print(f"  per-pair ratios training/fused, wall: median {ratio:.2f}x (range {wall_ratios[0]:.2f}"
              f"-{wall_ratios[-1]:.2f}); CPU time: median {pair_ratio(sa, sb, 1):.2f}x "
              f"(user time only, without the kernel time that is mostly page faults: "
              f"{statistics.median((a[1] - a[2]) / (b[1] - b[2]) for a, b in zip(sa, sb)):.2f}x); "
              f"ratio of the minima {min(s[0] for s in sa) / min(s[0] for s in sb):.2f}x  "
              f"[{time.perf_counter() - t0:.0f} s, load average {load()}]", flush=True)

        busy = max(os.getloadavg()[0], 0) > (os.cpu_count() or 1) + 0.5
        if busy:
            print(f"  WARNING: the machine is busy (load average {load()} on {os.cpu_count()} CPUs): other processes "
                  f"share the cores, so wall times are inflated and noisy; trust the per-pair and min ratios most")

        # 3. where the time goes
        bd_a, tot_a = breakdown(train, x, prof_runs)
        bd_b, tot_b = breakdown(fused, x, prof_runs)
        print(f"breakdown (forward hooks, median of {prof_runs} forwards each; wall seconds, share of the "
              f"forward, CPU seconds):")
        print(f"  {'':24s} {'training':>25s} {'fused':>25s}")
        for label, _types in CATEGORIES:
            if label in bd_a or label in bd_b:
                cells = []
                for bd, tot in ((bd_a, tot_a), (bd_b, tot_b)):
                    v = bd.get(label)
                    cells.append(f"{v[0]:7.3f} ({100 * v[0] / tot[0]:4.1f}%) cpu {v[1]:6.2f}" if v else "")
                print(f"  {label:24s} {cells[0]:>25s} {cells[1]:>25s}")
        rest = [(tot[0] - sum(v[0] for v in bd.values()), tot[1] - sum(v[1] for v in bd.values()))
                for bd, tot in ((bd_a, tot_a), (bd_b, tot_b))]
        print(f"  {'other (Python glue)':24s} {rest[0][0]:7.3f} ({100 * rest[0][0] / tot_a[0]:4.1f}%) cpu "
              f"{rest[0][1]:6.2f} {rest[1][0]:7.3f} ({100 * rest[1][0] / tot_b[0]:4.1f}%) cpu {rest[1][1]:6.2f}")
        print(f"  {'total':24s} {tot_a[0]:7.3f}          cpu {tot_a[1]:6.2f} {tot_b[0]:7.3f}          cpu {tot_b[1]:6.2f}")
        shared_a = tot_a[0] - bd_a["RepConv units"][0]
        shared_b = tot_b[0] - bd_b["fused 3x3 convs"][0]
        print(f"  shared part (everything but the conv units): training {shared_a:.3f} s, fused {shared_b:.3f} s")

        # 4. conv-only speed-up on the activations the units really see
        seen = record_unit_inputs(train, x, [n for n, _, _ in units])
        per_unit = {n: ([], []) for n, _, _ in units}

        def run_units(which):
            for name, rep, f in units:
                m = rep if which == 0 else f
                per_unit[name][which].append(timed(lambda: m(seen[name])))

        ca, cb = alternate(lambda: run_units(0), lambda: run_units(1), 1, conv_runs)
        for lst in per_unit.values():  # drop the warm-up calls
            del lst[0][0], lst[1][0]
        macs_a = macs_b = 0
        print(f"conv-only (the {len(units)} units on the activations recorded in one training forward; "
              f"warm-up 1, {conv_runs} alternating pairs; medians):")
        print(f"  {'unit':12s} {'input C x H x W':>16s} {'training s':>11s} {'fused s':>9s} {'speed-up':>9s} "
              f"{'CPU-time':>9s} {'MAC ratio':>10s}")
        for name, rep, f in units:
            xi = seen[name]
            ma, mb = conv_macs(rep, xi.shape[3], xi.shape[4], xi.shape[0] * xi.shape[1])
            macs_a, macs_b = macs_a + ma, macs_b + mb
            ua, ub = per_unit[name]
            shape = "x".join(str(d) for d in xi.shape[2:])
            print(f"  {name:12s} {shape:>16s} {med(ua):11.3f} {med(ub):9.3f} {pair_ratio(ua, ub):8.2f}x "
                  f"{pair_ratio(ua, ub, 1):8.2f}x {ma / mb:9.2f}x")
        conv_r, conv_r_cpu = pair_ratio(ca, cb), pair_ratio(ca, cb, 1)
        print(f"  all units: training {med(ca):.3f} s, fused {med(cb):.3f} s: conv-only speed-up {conv_r:.2f}x "
              f"(CPU time {conv_r_cpu:.2f}x; sys {med(ca, 2):.2f} s vs {med(cb, 2):.2f} s; "
              f"{med(ca, 3) / 1e3:,.0f} k vs {med(cb, 3) / 1e3:,.0f} k page faults); "
              f"conv MACs {macs_a / 1e9:.1f} G -> {macs_b / 1e9:.1f} G ({macs_a / macs_b:.2f}x)")
        prof = [op_profile(lambda which=which: [(rep if which == 0 else f)(seen[name]) for name, rep, f in units])
                for which in (0, 1)]
        print("  by aten op (torch.profiler, one pass over the units; self seconds, calls):")
        for label, pr in zip(("training", "fused"), prof):
            total = sum(v[0] for v in pr.values())
            cells = "  ".join(f"{g} {pr[g][0]:.3f} s ({pr[g][1]})" for g, _ in OP_GROUPS if g in pr)
            cells += f"  other {pr.get('other', [0.0])[0]:.3f} s"
            print(f"    {label:9s} {cells}  = {total:.3f} s")
        conv_op = prof[0]["conv"][0] / prof[1]["conv"][0]
        print(f"  convolutions alone: {conv_op:.2f}x faster fused (MAC ratio {macs_a / macs_b:.2f}x); BN + add + "
              f"avg-pool are {100 * (1 - prof[0]['conv'][0] / sum(v[0] for v in prof[0].values())):.0f}% of the "
              f"training units' time")
        share = bd_a["RepConv units"][0] / tot_a[0]
        amdahl = 1 / ((1 - share) + share / conv_r)
        print(f"Amdahl: the RepConv units are {100 * share:.1f}% of the training forward (breakdown); "
              f"with the {conv_r:.2f}x conv-only speed-up the whole model should gain {amdahl:.2f}x; "
              f"measured {ratio:.2f}x. The other {100 * (1 - share):.1f}% (neurons, BNTT, DS-MPA, TDM, ...) "
              f"is the same code in both graphs. Load average now {load()}")

    print(f"fusion speed-up (training graph / fused graph): {ratio:.2f}x")


if __name__ == "__main__":
    main()
