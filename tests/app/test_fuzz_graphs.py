"""The graph fuzzer (spikec/app/fuzz.py): seeded random IR graphs through every default pass (checked by
the checker) and every target (which must reproduce the interpreter), failures shrunk to a reproducer.

Seeds are fixed lists, so the suite is deterministic; ``SPIKEC_FUZZ_SEEDS=N`` runs N seeds per stage instead
(``python -m spikec.app.fuzz`` runs a longer campaign and prints reproducers). The mutant tests show that
the fuzzer finds a planted bug (a pass's weight math, an interpreter kernel) and prints a small reproducer.
"""
import os
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from spikec.app import fuzz
from spikec.core import interpreter
from spikec.app.fuzz import Block, Spec, build, check, generate, inputs, reproducer, shrink
from spikec.core.passes import run_passes
from spikec.core.serialize import graph_to_json
from spikec.ops import OPS
from spikec.passes import select

SEEDS = {"passes": 250, "onnx": 120, "nir": 120, "lava": 6}   # ~20 ms a graph; lava's simulator ~3 s
N = int(os.environ.get("SPIKEC_FUZZ_SEEDS", "0"))


def seeds(stage):
    return range(N or SEEDS[stage])


def layout(graph):
    return [(n.name, n.op, n.inputs, n.type) for n in graph.nodes]


# -- the generator ---------------------------------------------------------------------------------
def test_specs_build_deterministically_and_print_as_python():
    for seed in range(20):
        spec = generate(seed)
        assert generate(seed) == spec
        a, b = build(spec), build(eval(repr(spec), {"Spec": Spec, "Block": Block}))   # the reproducer form
        assert layout(a) == layout(b) and graph_to_json(a) == graph_to_json(b)
        for m, n in zip(a.nodes, b.nodes):
            assert m.params.keys() == n.params.keys()
            assert all(np.array_equal(m.params[k], n.params[k]) for k in m.params)
        assert np.array_equal(inputs(spec), inputs(spec)) and set(np.unique(inputs(spec))) <= {0.0, 1.0}
    assert generate(1) != generate(2)


def test_generator_covers_the_ops_and_the_pass_patterns():
    """Every target op and every default pass's pattern shows up, and the neurons are not silent."""
    ops, changed, active, neurons = set(), set(), 0, 0
    for seed in seeds("passes"):
        spec = generate(seed)
        graph, x = build(spec), inputs(spec)
        ops |= {n.op for n in graph.nodes}
        _, records = run_passes(graph, select("default")[0], x)
        changed |= {r.name for r in records if r.nodes_changed}
        trace = interpreter.run(graph, x)
        for n in graph.nodes:
            if n.op in ("lif", "intfire"):
                neurons += 1
                active += bool(trace.values[n.name].any())
    assert {"conv2d", "linear", "avgpool2d", "maxpool2d", "flatten", "lif", "intfire", "add", "batchnorm", "tdm",
            "delay"} <= ops
    assert {"fuse_repconv", "fold_batchnorm", "tdm_dual_kernel", "unroll_virtual_steps"} <= changed
    assert active >= 0.6 * neurons


def test_every_spec_builds_even_when_shrunk_to_nothing():
    """Shrinking may produce any combination of fields: the builder adapts rather than failing."""
    tiny = Spec(0, (1, 1, 1), steps=1, batch=1, blocks=tuple(Block(k, channels=1, stride=2, pool=p, delay=2, prebn=True,
                                                                    groups=2, bn=True)
                                                              for k in fuzz.KINDS for p in ("", "before", "after")))
    graph = build(tiny)
    assert graph.outputs == ("head.lif",)
    assert check(tiny, "passes").status == "ok"
    assert check(Spec(3, (2,), blocks=(), head="readout"), "onnx").status == "ok"


# -- the campaigns -----------------------------------------------------------------------------------
def _negative_alpha(spec: Spec) -> bool:
    """A hard-reset LIF with a negative input gain alpha after the passes (fold_batchnorm's BN -> LIF rule gives
    one for a negative BN gamma): the graph the fuzzer found the NIR export firing the wrong way on."""
    graph, x = build(spec), inputs(spec)
    deployed, _ = run_passes(graph, select("default")[0], x)
    return any(n.op == "lif" and (n.attrs["reset"] == "zero" or not np.any(n.params["beta"]))
               and np.any(n.params["alpha"] < 0) for n in deployed.nodes)


@pytest.mark.parametrize("stage", ["passes", "onnx", "nir", "lava"])
def test_random_graphs(stage):
    """(i) every default pass keeps each graph equivalent; (ii) each target reproduces the interpreter.

    A target may refuse a graph (UnsupportedOp), but most must run: the check is not vacuous."""
    if stage == "lava":
        from spikec.targets.lava import lava_available
        if lava_available() is not None:
            pytest.skip(f"Lava does not import here: {lava_available()}")
    campaign = fuzz.fuzz(seeds(stage), (stage,), shrink_failures=False)
    failures = campaign.failures
    if failures:
        small, out = shrink(failures[0].spec, failures[0].outcome, seconds=60)
        pytest.fail(f"{len(failures)} of {len(campaign.reports)} random graphs fail stage {stage!r} "
                    f"(seeds {[r.seed for r in failures]}); the first, shrunk:\n{reproducer(small, out)}")
    assert campaign.count("ok") >= 0.85 * len(campaign.reports), [r.outcome for r in campaign.reports
                                                                  if r.outcome.status != "ok"]


# conv -> 2x2 avg-pool -> BN (gamma < 0) -> LIF (beta 0, hard reset): fold_batchnorm folds the BN into the neuron
# as a sign-flipped Heaviside (alpha = -1), which the NIR file then fires the wrong way round.
NIR_NEGATIVE_ALPHA = Spec(seed=212, shape=(2, 2, 2), steps=1, batch=1, head="readout", head_size=1, ties=False,
                          blocks=(Block(kind="conv", channels=1, seed=337757046, kernel=3, bn=True, pool="after",
                                        reset="zero", beta=0.0, threshold=4),))


def test_nir_negative_alpha_reproducer_is_a_valid_graph():
    """The passes and the ONNX target get it right: the IR keeps its meaning, only the NIR export is wrong."""
    assert _negative_alpha(NIR_NEGATIVE_ALPHA)
    assert check(NIR_NEGATIVE_ALPHA, "passes").status == "ok"
    assert check(NIR_NEGATIVE_ALPHA, "onnx").status == "ok"


def test_nir_hard_reset_lif_with_negative_alpha_is_refused_by_name():
    """Found by the fuzzer: the export fired such a neuron the wrong way round; it is now refused, naming it."""
    out = check(NIR_NEGATIVE_ALPHA, "nir")
    assert out.status == "refused", out.detail
    assert "alpha is <= 0" in out.detail and "--passes none" in out.detail


# -- the fuzzer finds planted bugs -------------------------------------------------------------------
def _first_failure(stage, seed_range):
    campaign = fuzz.fuzz(seed_range, (stage,), shrink_failures=False)
    assert campaign.failures, f"the planted bug went unnoticed over seeds {list(seed_range)}"
    return campaign.failures[0]


def _assert_reproducer(report, stage, where):
    small, out = shrink(report.spec, report.outcome, seconds=30)   # (converges in well under a second)
    assert out.failed and out.stage == stage and out.where == where
    assert len(build(small).nodes) <= len(build(report.spec).nodes)
    assert (len(small.blocks), small.steps, small.batch) <= (len(report.spec.blocks), report.spec.steps,
                                                             report.spec.batch)
    text = reproducer(small, out)
    assert f"spec = {small!r}" in text and f"check(spec, {stage!r})" in text and '"format": "spikec-ir"' in text
    scope = {}
    code = "\n".join(line for line in text.splitlines() if not line.startswith(("#", "print(")))
    exec(code, scope)                                      # the printed code rebuilds the failing spec
    again = check(scope["spec"], stage)
    assert scope["spec"] == small and again.failed and again.where == where
    print(text)
    return small


def test_fuzzer_finds_a_wrong_bias_in_a_pass(monkeypatch):
    """A BN fold whose bias is off by 1e-6 (``fold_bn_weights``): the checker's 1e-9 tolerance catches it."""
    from spikec.passes import fold_batchnorm
    right = fold_batchnorm.fold_bn_weights

    def slightly_wrong(*args):
        w, b = right(*args)
        return w, b + 1e-6
    monkeypatch.setattr(fold_batchnorm, "fold_bn_weights", slightly_wrong)
    report = _first_failure("passes", range(6))
    assert report.outcome.where == "pass fold_batchnorm" and "not equivalent" in report.outcome.detail
    small = _assert_reproducer(report, "passes", "pass fold_batchnorm")
    monkeypatch.undo()
    assert check(small, "passes").status == "ok"           # the reproducer fails only because of the mutant


def test_fuzzer_finds_a_strict_threshold_in_the_interpreter(monkeypatch):
    """An interpreter LIF firing on ``U > theta`` instead of ``U >= theta``: the ONNX target disagrees exactly at
    the ties the fuzzer's on-grid thresholds produce (the passes cannot see it: both sides use the kernel)."""
    right = OPS["lif"].kernel

    def strict(ctx, node, p, x):  # U - nextafter(theta, +inf) >= 0  is  U > theta
        up = torch.nextafter(p["threshold"], torch.tensor(float("inf"), dtype=p["threshold"].dtype))
        return right(ctx, node, dict(p, threshold=up), x)
    monkeypatch.setitem(OPS, "lif", replace(OPS["lif"], kernel=strict))
    report = _first_failure("onnx", range(6))
    margins = [float(m) for m in re.findall(r'"margin": ([-+.e0-9]+)', report.outcome.detail)]
    assert report.outcome.where == "target onnx" and min(margins) < 1e-12    # decided at an exact tie
    small = _assert_reproducer(report, "onnx", "target onnx")
    monkeypatch.undo()
    assert check(small, "onnx").status == "ok"
