"""A graph fuzzer: seeded random IR graphs, checked through every pass and every target, shrunk on failure.

``generate(seed)`` draws a ``Spec``: an input shape, T, B and a chain of blocks (conv / dense layers with
optional bias, BN before or after, average pool before or after, a delayed input; RepConv multi-branch
units; TDM before a conv; residual sums; max pools; LIF (soft/hard reset, leak, threshold, per channel)
or integer-firing neurons) and a head (flatten, linear, LIF or a read-out). ``build(spec)`` makes the IR
graph deterministically (node names from block positions, weights from the blocks' seeds), so a spec
*is* a reproducer: it prints as Python (``repr``) and builds the same graph anywhere.

``check(spec, stage)`` runs one stage: ``"passes"`` (the default pipeline through ``run_passes``, then
each pass alone, every one checked by the checker) or ``"onnx"`` / ``"nir"`` / ``"lava"`` (the deployed
graph through the target, which must reproduce the interpreter: ``TargetResult.ok``). A target's
``UnsupportedOp`` is a refusal, not a failure. ``shrink`` drops blocks, features, channels, pixels, steps
and samples while the same stage still fails; ``reproducer`` prints the shrunk spec as Python plus its
graph JSON. Weights are dyadic (multiples of 1/8 scaled by a power of two), leaks 0, 1/2 or 1 and
thresholds k/8, so membranes are exact in any summation order and really tie with thresholds (which
checks ``>=``); BN parameters are continuous, so no tie hangs on rounding there. A mismatch is a bug, not
rounding. For NIR (float32 consumers) thresholds sit 2^-14 off the grid: no tie at all.
``python -m spikec.app.fuzz --seeds 0:200 --stages passes,onnx`` runs a longer campaign.
"""
import json
import time
from dataclasses import dataclass, field, replace

import numpy as np

from spikec.ir.errors import SpikecError, UnsupportedOp
from spikec.core.builder import GraphBuilder
from spikec.ir.graph import Graph
from spikec.core.verify import verify
from spikec.ops.neurons import INTFIRE, LIF

STAGES = ("passes", "onnx", "nir", "lava")
KINDS = ("conv", "conv", "conv", "repconv", "tdm", "residual", "maxpool")
OFF_GRID = 2.0 ** -14   # thresholds k/8 + this: no dyadic membrane ever ties with one
NO_INTFIRE = ("nir",)   # NIR neurons emit binary events only: integer-firing blocks are drawn without them


@dataclass(frozen=True)
class Block:
    """One layer of the chain. Fields a block kind does not use are ignored, so any block builds anywhere."""
    kind: str                   # conv | repconv | tdm | residual | maxpool
    channels: int = 2           # output channels (conv, repconv, tdm); residual keeps its input's
    seed: int = 0
    kernel: int = 3
    stride: int = 1
    pad: bool = True
    groups: int = 1
    bias: bool = False
    bn: bool = False            # batchnorm after the synapse (repconv: the avg-pool branch, when square)
    prebn: bool = False         # batchnorm before an unpadded synapse (its fold needs no padding)
    pool: str = ""              # "before" | "after": a 2x2 average pool around the conv
    delay: int = 0              # the synapse reads its input delayed by this many steps
    neuron: str = LIF           # lif | intfire
    reset: str = "subtract"
    beta: float = 0.5
    threshold: int = 6          # in eighths
    alpha: float = 1.0          # LIF input gain
    v_reset: float = 0.0        # LIF hard-reset value
    per_channel: bool = False
    neuron_bias: bool = False


@dataclass(frozen=True)
class Spec:
    seed: int
    shape: tuple                # per-step input shape: (C, H, W) or (N,); binary spikes
    steps: int = 3
    batch: int = 2
    blocks: tuple = ()
    head: str = LIF             # lif | readout
    head_size: int = 3
    ties: bool = True           # thresholds on the k/8 grid: membranes can equal them exactly (tests >=)


# -- generation -------------------------------------------------------------------------
def generate(seed: int, *, stage: str = "passes") -> Spec:
    """A random spec; small for ``lava`` (its simulator is slow); for ``nir`` without integer neurons and with
    thresholds off the grid (its consumers run in float32, where a tie is decided by rounding)."""
    rng = np.random.default_rng([seed, 7])
    small = stage == "lava"
    if rng.random() < 0.25:
        shape = (int(rng.integers(3, 9 if small else 17)),)
    else:
        hi = 6 if small else 9
        shape = (int(rng.integers(1, 4)), int(rng.integers(2, hi + 1)), int(rng.integers(2, hi + 1)))
    blocks = tuple(_block(rng, stage) for _ in range(int(rng.integers(1, 4 if small else 5))))
    return Spec(seed, shape, int(rng.integers(1, 5 if small else 7)), int(rng.integers(1, 3 if small else 4)),
                blocks, str(rng.choice([LIF, "readout"])), int(rng.integers(2, 5)), ties=stage != "nir")


def _block(rng, stage) -> Block:
    pick = lambda *options: options[int(rng.integers(len(options)))]
    coin = lambda p=0.5: bool(rng.random() < p)
    beta = pick(0.0, 0.5, 0.5, 1.0)
    neuron = INTFIRE if stage not in NO_INTFIRE and coin(0.15) else LIF
    return Block(str(pick(*KINDS)), int(rng.integers(1, 5)), int(rng.integers(2 ** 31)), kernel=pick(1, 3, 3),
                 stride=pick(1, 1, 2), pad=coin(0.8), groups=pick(1, 1, 2), bias=coin(), bn=coin(0.4),
                 prebn=coin(0.15), pool=pick("", "", "", "before", "after"), delay=pick(0, 0, 0, 1, 2),
                 neuron=neuron, reset=pick("subtract", "zero"), beta=beta, threshold=int(rng.integers(1, 9)),
                 per_channel=coin(0.3), neuron_bias=beta < 1 and coin(0.25), alpha=pick(1.0, 1.0, 1.0, 0.5, 2.0),
                 v_reset=pick(0.0, 0.0, 0.0, -0.25, 0.25))


# -- building ---------------------------------------------------------------------------
class _Builder(GraphBuilder):
    def __init__(self, spec: Spec):
        super().__init__(spec.shape, "binary")
        self.spec = spec

    def emit(self, name, op, inputs, attrs=None, params=None) -> str:
        return self.add(name, op, inputs, attrs, params)


def _weights(rng, shape, fan_in) -> np.ndarray:
    """Dyadic weights k/8, scaled by a power of two so ~30% input activity gives sums of order 1."""
    scale = 2.0 ** -round(np.log2(max(1.0, np.sqrt(0.15 * fan_in))))
    return rng.integers(-4, 9, shape) / 8.0 * scale


def _bn(b: _Builder, rng, name, x) -> str:
    c = b.shape(x)[0]
    params = {"gamma": rng.choice([-1.0, 1.0], c) * rng.uniform(0.5, 1.5, c), "beta": rng.normal(0, 0.3, c),
              "mean": rng.normal(0, 0.3, c), "var": rng.uniform(0.5, 2.0, c)}
    return b.emit(name, "batchnorm", [x], {"eps": 1e-5}, params)


def _neuron(b: _Builder, blk: Block, rng, name, x) -> str:
    c = b.shape(x)[0]
    theta = (rng.integers(1, 9, c) if blk.per_channel else np.array(float(blk.threshold))) / 8.0
    theta = theta if b.spec.ties else theta + OFF_GRID
    if blk.neuron == INTFIRE:
        params = {"beta": np.array(blk.beta), "alpha": np.array(blk.alpha), "threshold": theta}
        attrs = {"max_spikes": 1 + blk.seed % 3, "rounding": "floor" if blk.reset == "zero" else "round"}
        return b.emit(name, INTFIRE, [x], attrs, params)
    beta = rng.choice([0.0, 0.5], c) if blk.per_channel and blk.beta < 1 else np.array(blk.beta)
    bias = rng.integers(-2, 3, c) / 8.0 if blk.neuron_bias and blk.beta < 1 else np.array(0.0)
    params = {"beta": beta, "alpha": np.array(blk.alpha), "bias": bias, "threshold": theta,
              "v_reset": np.array(blk.v_reset)}
    return b.emit(name, LIF, [x], {"reset": blk.reset}, params)


def _synapse(b: _Builder, blk: Block, rng, p, x, c_out) -> str:
    """conv2d or linear (on a vector) from ``x`` to ``c_out`` channels, with the block's options."""
    if min(blk.delay, b.spec.steps - 1) > 0:  # a delay of T or more would only feed zeros
        x = b.emit(f"{p}.delay", "delay", [x], {"steps": min(blk.delay, b.spec.steps - 1)})
    shape = b.shape(x)
    if len(shape) == 1:
        if blk.prebn:
            x = _bn(b, rng, f"{p}.prebn", x)
        w = _weights(rng, (c_out, shape[0]), shape[0])
        params = {"weight": w, **({"bias": rng.integers(-4, 5, c_out) / 8.0} if blk.bias else {})}
        return b.emit(f"{p}.fc", "linear", [x], {}, params)
    c, h, w_ = shape
    if blk.pool == "before" and h % 2 == 0 and w_ % 2 == 0:
        x = b.emit(f"{p}.pool", "avgpool2d", [x], _pool_attrs(2))
        c, h, w_ = b.shape(x)
    k = blk.kernel if min(h, w_) >= blk.kernel or blk.pad else 1
    pad = k // 2 if blk.pad else 0
    stride = blk.stride if min(h, w_) >= 4 else 1
    groups = blk.groups if c % blk.groups == 0 and c_out % blk.groups == 0 else 1
    if blk.prebn and pad == 0:
        x = _bn(b, rng, f"{p}.prebn", x)
    params = {"weight": _weights(rng, (c_out, c // groups, k, k), c // groups * k * k)}
    if blk.bias:
        params["bias"] = rng.integers(-4, 5, c_out) / 8.0
    attrs = {"stride": (stride, stride), "padding": (pad, pad), "dilation": (1, 1), "groups": groups}
    y = b.emit(f"{p}.conv", "conv2d", [x], attrs, params)
    if blk.pool == "after" and min(b.shape(y)[1:]) >= 2:
        y = b.emit(f"{p}.pool2", "avgpool2d", [y], _pool_attrs(2))
    return y


def _pool_attrs(k: int) -> dict:
    return {"kernel": (k, k), "stride": (k, k), "padding": (0, 0), "ceil_mode": False, "count_include_pad": True}


def _repconv(b: _Builder, blk: Block, rng, p, x) -> str:
    """A RepConv unit on ``x``: 3x3+BN, 1x1+BN, and (square, stride 1) identity BN and 3x3 avg-pool+BN."""
    c, h, w = b.shape(x)
    c_out, stride = blk.channels, blk.stride if min(h, w) >= 4 else 1
    leaves = []
    for tag, k in (("b3", 3), ("b1", 1)):
        params = {"weight": _weights(rng, (c_out, c, k, k), c * k * k)}
        if blk.bias:
            params["bias"] = rng.integers(-4, 5, c_out) / 8.0
        attrs = {"stride": (stride, stride), "padding": (k // 2, k // 2), "dilation": (1, 1), "groups": 1}
        leaves.append(_bn(b, rng, f"{p}.{tag}.bn", b.emit(f"{p}.{tag}", "conv2d", [x], attrs, params)))
    if c == c_out and stride == 1:
        leaves.append(_bn(b, rng, f"{p}.id.bn", x))
        if blk.bn:
            pool = {**_pool_attrs(3), "stride": (1, 1), "padding": (1, 1)}
            leaves.append(_bn(b, rng, f"{p}.avg.bn", b.emit(f"{p}.avg", "avgpool2d", [x], pool)))
    y = leaves[0]
    for i, leaf in enumerate(leaves[1:], 1):
        y = b.emit(f"{p}.sum{i}" if i < len(leaves) - 1 else f"{p}.rep", "add", [y, leaf])
    return y


def _add_block(b: _Builder, blk: Block, idx: int, x: str) -> str:
    rng = np.random.default_rng([b.spec.seed, blk.seed])
    p = f"b{idx}"
    shape, kind = b.shape(x), blk.kind
    if kind == "maxpool":
        if len(shape) != 3 or min(shape[1:]) < 2 or b.types[x].kind != "binary":
            return x  # a max over graded values is no OR (no target maps it): this block is a no-op here
        return b.emit(f"{p}.maxpool", "maxpool2d", [x], {**_pool_attrs(2), "dilation": (1, 1)})
    if kind == "repconv" and len(shape) == 3:
        y = _repconv(b, blk, rng, p, x)
    elif kind == "tdm" and len(shape) == 3:
        t = b.emit(f"{p}.tdm", "tdm", [x], {}, {"lam": rng.integers(-4, 5, shape[0]) / 8.0})
        y = _synapse(b, replace(blk, delay=0, groups=1, prebn=False, pool=""), rng, p, t, blk.channels)
    else:
        residual = kind == "residual"
        if residual:  # same shape out: stride 1, centred kernel, no pool
            blk = replace(blk, stride=1, pad=True, pool="", prebn=False)
        y = _synapse(b, blk, rng, p, x, shape[0] if residual else blk.channels)
    if blk.bn and kind != "repconv":
        y = _bn(b, rng, f"{p}.bn", y)
    s = _neuron(b, blk, rng, f"{p}.{blk.neuron}", y)
    if kind == "residual" and b.shape(s) == shape:
        return b.emit(f"{p}.res", "add", [x, s])
    return s


def build(spec: Spec) -> Graph:
    """The IR graph of ``spec``, verified. Deterministic: the same spec gives the same nodes and weights."""
    b = _Builder(spec)
    x = "x"
    for i, blk in enumerate(spec.blocks):
        x = _add_block(b, blk, i, x)
    rng = np.random.default_rng([spec.seed, 99])
    if len(b.shape(x)) > 1:
        x = b.emit("head.flatten", "flatten", [x], {"start": 0, "end": -1})
    n = b.shape(x)[0]
    y = b.emit("head.fc", "linear", [x], {}, {"weight": _weights(rng, (spec.head_size, n), n),
                                              "bias": rng.integers(-4, 5, spec.head_size) / 8.0})
    if spec.head == LIF:
        y = _neuron(b, Block("head", threshold=4, beta=0.5, reset="zero"), rng, "head.lif", y)
    return verify(Graph(tuple(b.nodes), (y,), {"source": f"spikec.app.fuzz seed {spec.seed}"}),
                  "after building a fuzz graph")


def inputs(spec: Spec) -> np.ndarray:
    """Binary spikes ``[T, B, *shape]``, p = 0.3, seeded by the spec."""
    rng = np.random.default_rng([spec.seed, 1])
    return (rng.random((spec.steps, spec.batch, *spec.shape)) < 0.3).astype(np.float64)


# -- checking ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    stage: str
    status: str                 # ok | refused | fail
    where: str = ""             # what failed: "pass fold_batchnorm", "target onnx", "build"
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def _passes(graph: Graph, x, outcome_stage: str, trace=None):
    """The default pipeline, one ``run_passes`` call per pass (so a failure names its pass): (graph, Outcome).

    ``trace``: a run of ``graph`` on ``x`` already made (``record="all"``)."""
    from spikec.core.interpreter import run
    from spikec.core.passes import run_passes
    from spikec.passes import select
    passes, _ = select("default")
    trace, done = trace or run(graph, x), []
    for p in passes:
        keep: list = []
        try:
            graph, _ = run_passes(graph, [p], x, trace=trace, keep=keep)
        except SpikecError as e:
            after = f" (after {', '.join(done)})" if done else ""
            return graph, Outcome(outcome_stage, "fail", f"pass {p.name}", f"default pipeline{after}: {e.message()}")
        trace = keep[0]
        done.append(p.name)
    return graph, None


def check_passes(spec: Spec) -> Outcome:
    """Every default pass keeps the graph equivalent: in the default pipeline, and each alone on the graph."""
    from spikec.core.interpreter import run
    from spikec.core.passes import run_passes
    from spikec.passes import select
    graph, x = build(spec), inputs(spec)
    trace = run(graph, x)
    _, failed = _passes(graph, x, "passes", trace)
    if failed:
        return failed
    for p in select("default")[0]:
        try:
            run_passes(graph, [p], x, trace=trace)
        except SpikecError as e:
            return Outcome("passes", "fail", f"pass {p.name}", f"alone on the built graph: {e.message()}")
    return Outcome("passes", "ok")


def check_target(spec: Spec, target: str) -> Outcome:
    """The deployed graph (after the default passes) through ``target``: ``ok``, a refusal, or a failure."""
    from spikec.core.interpreter import run
    from spikec.targets import get_target
    x = inputs(spec)
    deployed, failed = _passes(build(spec), x, target)
    if failed:
        return failed
    fn = get_target(target)
    try:
        result = fn(deployed, x, run(deployed, x), {"seed": 0})
    except UnsupportedOp as e:
        return Outcome(target, "refused", f"target {target}", e.message())
    except Exception as e:  # a crash on a graph the verifier accepts is a bug of the target
        return Outcome(target, "fail", f"target {target}", f"{type(e).__name__}: {e}")
    if not result.ok:
        return Outcome(target, "fail", f"target {target}", _mismatch_summary(result.report))
    return Outcome(target, "ok")


def _mismatch_summary(report: dict) -> str:
    keys = ("spike_mismatches", "real_mismatches", "max_rel_diff", "exact", "bit_exact", "first_divergent_layer",
            "mismatch_counts", "first_mismatches", "interpreter", "consumers")
    return json.dumps({k: report[k] for k in keys if k in report}, default=str)[:2000]


def check(spec: Spec, stage: str) -> Outcome:
    """One stage on ``spec``; never raises (but for interrupts): what went wrong is in the outcome."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")
    try:
        build(spec)
    except SpikecError as e:  # the builder made an invalid graph: a fuzzer bug, reported as such
        return Outcome(stage, "fail", "build", e.message())
    try:
        return check_passes(spec) if stage == "passes" else check_target(spec, stage)
    except Exception as e:  # the interpreter (or a pass outside run_passes' guard) crashed
        return Outcome(stage, "fail", "crash", f"{type(e).__name__}: {e}")


# -- shrinking --------------------------------------------------------------------------
FEATURE_OFF = {"bias": False, "bn": False, "prebn": False, "pool": "", "delay": 0, "neuron_bias": False,
               "per_channel": False, "groups": 1, "stride": 1, "neuron": LIF, "kind": "conv", "alpha": 1.0,
               "v_reset": 0.0}


def _candidates(spec: Spec):
    """Smaller specs, biggest cuts first: fewer blocks, plainer blocks, fewer channels / pixels / steps."""
    blocks = spec.blocks
    for i in range(len(blocks)):
        yield replace(spec, blocks=blocks[:i] + blocks[i + 1:])
    if spec.head != "readout":
        yield replace(spec, head="readout")
    for i, blk in enumerate(blocks):
        for key, off in FEATURE_OFF.items():
            if getattr(blk, key) != off:
                yield replace(spec, blocks=blocks[:i] + (replace(blk, **{key: off}),) + blocks[i + 1:])
        if blk.channels > 1:
            yield replace(spec, blocks=blocks[:i] + (replace(blk, channels=blk.channels - 1),) + blocks[i + 1:])
    for d in range(len(spec.shape)):
        if spec.shape[d] > 1:
            yield replace(spec, shape=spec.shape[:d] + (spec.shape[d] - 1,) + spec.shape[d + 1:])
    if spec.steps > 2:
        yield replace(spec, steps=1)
    if spec.steps > 1:
        yield replace(spec, steps=spec.steps - 1)
    if spec.batch > 1:
        yield replace(spec, batch=1)
    if spec.head_size > 1:
        yield replace(spec, head_size=spec.head_size - 1)


def shrink(spec: Spec, failure: Outcome, *, budget: int = 150, seconds: float = 120.0) -> tuple[Spec, Outcome]:
    """Greedily the smallest spec found whose ``failure.stage`` still fails at ``failure.where``."""
    deadline, tries = time.monotonic() + seconds, 0
    progress = True
    while progress and tries < budget and time.monotonic() < deadline:
        progress = False
        for cand in _candidates(spec):
            if tries >= budget or time.monotonic() >= deadline:
                break
            tries += 1
            out = check(cand, failure.stage)
            if out.failed and out.where == failure.where:
                spec, failure, progress = cand, out, True
                break
    return spec, failure


# -- reporting --------------------------------------------------------------------------
def reproducer(spec: Spec, failure: Outcome) -> str:
    """Python to paste (it rebuilds the graph and re-runs the failing check), then the graph as JSON."""
    from spikec.core.serialize import graph_to_json
    detail = "\n".join("#   " + line for line in failure.detail.splitlines()[:12])
    try:
        doc = json.dumps(graph_to_json(build(spec)), indent=None, default=str)
    except SpikecError as e:
        doc = f"(the spec does not build: {e.message()})"
    return (f"# spikec fuzz reproducer: seed {spec.seed}, stage {failure.stage!r} fails at {failure.where}\n"
            f"{detail}\n"
            "from spikec.app.fuzz import Block, Spec, build, check, inputs\n"
            f"spec = {spec!r}\n"
            f"print(check(spec, {failure.stage!r}))\n"
            "# graph, x = build(spec), inputs(spec)   # the IR graph and its inputs; save_graph(graph, dir) writes it\n"
            f"# graph JSON (spikec.core.serialize.graph_to_json; weights come from the spec's seeds):\n# {doc}\n")


@dataclass(frozen=True)
class Report:
    seed: int
    stage: str
    outcome: Outcome
    spec: Spec
    shrunk: Spec | None = None
    shrunk_outcome: Outcome | None = None
    seconds: float = 0.0

    @property
    def text(self) -> str:
        return reproducer(self.shrunk or self.spec, self.shrunk_outcome or self.outcome)


@dataclass(frozen=True)
class Campaign:
    reports: list = field(default_factory=list)   # Report per (seed, stage), in order

    def count(self, status: str, stage: str | None = None) -> int:
        return sum(r.outcome.status == status and stage in (None, r.stage) for r in self.reports)

    @property
    def failures(self) -> list:
        return [r for r in self.reports if r.outcome.failed]


def fuzz(seeds, stages=STAGES, *, shrink_failures: bool = True, campaign: Campaign | None = None) -> Campaign:
    """Generate, check each stage, shrink every failure; returns every outcome (failures carry a reproducer)."""
    campaign = campaign or Campaign()
    for seed in seeds:
        for stage in stages:
            start = time.perf_counter()
            spec = generate(seed, stage=stage)
            out = check(spec, stage)
            small, small_out = shrink(spec, out) if out.failed and shrink_failures else (None, None)
            campaign.reports.append(Report(seed, stage, out, spec, small, small_out, time.perf_counter() - start))
    return campaign


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="spikec graph fuzzer: random graphs through the passes and targets")
    ap.add_argument("--seeds", default="0:50", help="a range start:stop (default 0:50)")
    ap.add_argument("--stages", default="passes,onnx,nir", help=f"comma-separated, of {','.join(STAGES)}")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)  # tiny graphs: the intra-op thread pool only adds synchronisation (tests/conftest.py)
    start, stop = (int(v) for v in args.seeds.split(":"))
    stages = tuple(s for s in args.stages.split(",") if s)
    campaign = fuzz(range(start, stop), stages)
    for stage in stages:
        print(f"{stage}: {campaign.count('ok', stage)} ok, {campaign.count('refused', stage)} refused, "
              f"{campaign.count('fail', stage)} failed")
    for r in campaign.failures:
        print(r.text)
    return 1 if campaign.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
