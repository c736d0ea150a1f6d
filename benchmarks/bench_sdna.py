"""Linear vs Pairwise SDNA forward in PyTorch on CPU: peak memory and throughput for k = 3, 5, 7.

Run: ``.venv/bin/python benchmarks/bench_sdna.py [--quick] [--threads N]``.
Workload (event form, inference): ``q, k, v`` integer spikes in 0..4 (70% zeros), ``[T, B, C, H, W] =
[4, 4, 32, 32, 32]`` float32, dilation 1, gate BN on, leaky gate neurons (tau = 1.5), ``eval()`` and
``torch.no_grad()``. The output is the same function of the same inputs as the module computes it
(spikec/nn/sdna.py); no custom kernels.

Peak memory. tracemalloc does not see torch's CPU allocations (they bypass Python's allocator), and
torch has no CPU counterpart of ``torch.cuda.max_memory_allocated``. Two measurements, each in a *fresh
subprocess* per configuration:
  * live-tensor peak (the reported ratio): a ``TorchDispatchMode`` sees every ATen op's output; the bytes
    of each new storage count from its creation until the last tensor using it dies (weakref
    finalizers), and the peak of that sum over one forward is taken -- the CPU analogue of
    ``max_memory_allocated`` (inputs and parameters, allocated before, are not counted; scratch
    buffers a kernel allocates internally are not seen). Deterministic.
  * resident-set peak (cross-check): reset the kernel's high-water mark (``echo 5 > /proc/self/clear_refs``,
    Linux), read ``VmRSS``, run one forward, read ``VmHWM``; the difference is the resident memory the
    forward added at its peak, allocator and page effects included. It varies between runs (the median
    is reported). Where clear_refs is not writable it falls back to ``ru_maxrss`` (an upper bound).
Memory runs alternate Linear/Pairwise; the median is reported.

Throughput. One process per k; Linear and Pairwise forwards alternate (A B A B ..., after one warm-up
each) and the median time per forward is taken; throughput = samples (B) per wall-clock second. The
ratio of median process CPU times is printed beside it (on a shared machine it is often the steadier
number). One intra-op thread by default: on a shared 2-core machine, OpenMP's synchronisation between
two threads made small ops unstable; ``--threads 2`` to use both cores.

Published numbers are GPU measurements of the authors' implementation (1.57x memory and 1.25x
throughput at k = 3; 4.14x and 2.96x at k = 7); this is a CPU PyTorch reference implementation that
materialises the ``[T*B, C, k*k, H*W]`` pair tensors, so its ratios are expected to be larger.
The last line is the k = 7 throughput ratio.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

SHAPE = (4, 4, 32, 32, 32)   # T, B, C, H, W
KERNELS = (3, 5, 7)
PUBLISHED = {3: (1.57, 1.25), 7: (4.14, 2.96)}   # (memory Pairwise/Linear, throughput Linear/Pairwise), GPU


def build(variant: str, kernel: int, shape=SHAPE, seed=0):
    import torch
    from spikec.nn.sdna import SDNALinear, SDNAPairwise

    torch.manual_seed(seed)
    t, b, c, h, w = shape
    beta = 1.0 - 1.0 / 1.5
    cls = SDNALinear if variant == "linear" else SDNAPairwise
    m = cls(kernel, 1, threshold=1.0, max_spikes=4, beta=beta, alpha=1.0 - beta, gate_bn=c).eval()
    m.gate_bn.running_mean.uniform_(0.0, 1.0)
    m.gate_bn.running_var.uniform_(0.5, 2.0)
    g = torch.Generator().manual_seed(seed)

    def spikes():
        counts = torch.randint(1, 5, shape, generator=g).float()
        return counts * (torch.rand(shape, generator=g) < 0.3)

    return m, (spikes(), spikes(), spikes())


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (the kernel reports kB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def live_tensor_peak(fn) -> int:
    """Peak bytes of tensor storages created by ``fn()`` and alive at the same time (ATen dispatch level)."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Peak(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.refs, self.size, self.current, self.peak = {}, {}, 0, 0

        def release(self, key):
            self.refs[key] -= 1
            if self.refs[key] == 0:
                del self.refs[key]
                self.current -= self.size.pop(key)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr():
                    key = t.untyped_storage().data_ptr()
                    if key not in self.refs:   # a new storage (views and in-place results share one)
                        self.refs[key], self.size[key] = 0, t.untyped_storage().nbytes()
                        self.current += self.size[key]
                        self.peak = max(self.peak, self.current)
                    self.refs[key] += 1
                    weakref.finalize(t, self.release, key)
            return out

    mode = Peak()
    with mode:
        out = fn()
    del out
    return mode.peak


def child_memory(variant: str, kernel: int, threads: int) -> dict:
    """Runs in a fresh process: resident memory added by one forward at its peak, then the live-tensor peak."""
    import gc

    import torch

    torch.set_num_threads(threads)
    m, (q, k, v) = build(variant, kernel)
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # reset VmHWM to the current RSS
        method = "VmHWM after clear_refs"
    except OSError:
        method = "ru_maxrss (upper bound: includes earlier peaks)"
    before = _status("VmRSS")
    with torch.no_grad():
        out = m(q, k, v)
    if method.startswith("VmHWM"):
        peak = _status("VmHWM")
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    del out
    with torch.no_grad():
        tensors = live_tensor_peak(lambda: m(q, k, v))
    return {"rss_bytes": peak - before, "tensor_bytes": tensors, "method": method}


def memory(variant: str, kernel: int, threads: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child-memory", variant, str(kernel), "--threads", str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def child_throughput(kernel: int, reps: int, threads: int) -> dict:
    """Alternating timed forwards of both forms in one process; median seconds per forward."""
    import torch

    torch.set_num_threads(threads)
    models = {name: build(name, kernel) for name in ("linear", "pairwise")}
    wall, cpu = {name: [] for name in models}, {name: [] for name in models}
    with torch.no_grad():
        for name, (m, x) in models.items():   # warm-up
            m(*x)
        for r in range(reps):
            order = ("linear", "pairwise") if r % 2 == 0 else ("pairwise", "linear")
            for name in order:
                m, x = models[name]
                start, start_cpu = time.perf_counter(), time.process_time()
                m(*x)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    return {name: {"wall": statistics.median(wall[name]), "cpu": statistics.median(cpu[name])} for name in models}


def throughput(kernel: int, reps: int, threads: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child-throughput", str(kernel), str(reps),
           "--threads", str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (1 memory run, 3 timed runs per form)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--child-memory", nargs=2, metavar=("VARIANT", "K"), help=argparse.SUPPRESS)
    ap.add_argument("--child-throughput", nargs=2, metavar=("K", "REPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_memory:
        print(json.dumps(child_memory(args.child_memory[0], int(args.child_memory[1]), args.threads)))
        return
    if args.child_throughput:
        print(json.dumps(child_throughput(int(args.child_throughput[0]), int(args.child_throughput[1]),
                                          args.threads)))
        return

    mem_reps, time_reps = (1, 3) if args.quick else (3, 5)
    t, b, c, h, w = SHAPE
    print(f"SDNA forward, CPU PyTorch {'(quick) ' if args.quick else ''}[T, B, C, H, W] = {list(SHAPE)} float32, "
          f"dilation 1, gate BN, eval + no_grad, {args.threads} thread(s)")
    print(f"memory: peak of live tensors / of resident memory added by one forward, fresh process each, median of "
          f"{mem_reps}; time: median of {time_reps} alternating forwards (wall clock; and process CPU time)")
    start = time.time()
    results = {}
    method = None
    mib = lambda v: f"{v / 2**20:6.1f}"
    for kernel in KERNELS:
        mem = {(name, key): [] for name in ("linear", "pairwise") for key in ("tensor_bytes", "rss_bytes")}
        for r in range(mem_reps):
            for name in (("linear", "pairwise") if r % 2 == 0 else ("pairwise", "linear")):
                res = memory(name, kernel, args.threads)
                for key in ("tensor_bytes", "rss_bytes"):
                    mem[name, key].append(res[key])
                method = res["method"]
        mem = {key: statistics.median(v) for key, v in mem.items()}
        secs = throughput(kernel, time_reps, args.threads)
        mem_ratio = mem["pairwise", "tensor_bytes"] / mem["linear", "tensor_bytes"]
        rss_ratio = mem["pairwise", "rss_bytes"] / mem["linear", "rss_bytes"]
        thr = {name: b / s["wall"] for name, s in secs.items()}
        thr_ratio = thr["linear"] / thr["pairwise"]
        cpu_ratio = secs["pairwise"]["cpu"] / secs["linear"]["cpu"]
        print(f"k={kernel}: live-tensor peak MiB Linear {mib(mem['linear', 'tensor_bytes'])} Pairwise "
              f"{mib(mem['pairwise', 'tensor_bytes'])} | RSS peak MiB Linear {mib(mem['linear', 'rss_bytes'])} "
              f"Pairwise {mib(mem['pairwise', 'rss_bytes'])} | samples/s Linear {thr['linear']:7.1f} "
              f"Pairwise {thr['pairwise']:6.2f}", flush=True)
        pub = PUBLISHED.get(kernel)
        note = f"   (published GPU: {pub[0]:.2f}x, {pub[1]:.2f}x)" if pub else ""
        print(f"k={kernel}: memory Pairwise/Linear {mem_ratio:.2f}x (RSS {rss_ratio:.2f}x)  "
              f"throughput Linear/Pairwise {thr_ratio:.2f}x (CPU time {cpu_ratio:.2f}x){note}", flush=True)
        results[kernel] = (mem_ratio, thr_ratio, cpu_ratio)
    print(f"RSS measured with {method}; total {time.time() - start:.0f}s")
    print(f"k=7 throughput ratio Linear/Pairwise: {results[7][1]:.2f}x (wall clock; CPU time {results[7][2]:.2f}x)")


if __name__ == "__main__":
    main()
