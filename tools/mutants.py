"""The curated mutants of ``tools/mutation.py``: realistic one-line bugs in the compiler.

Each ``Mutant`` replaces ``original`` (text that must occur exactly once in ``file``; a few lines of context
when the changed line alone repeats) by ``replacement``. ``tests`` are the test files run against it (the
most relevant ones, fastest and most likely to fail first: the run stops at the first failure). A ``pass``
mutant says whether it is ``semantic`` (changes what the compiled graph computes, so the runtime checks of
``spikec compile`` must catch it too) and may name the shipped ``examples`` to try first.

``tests/tools/test_mutants_apply.py`` keeps this list honest against the current tree.
"""
from dataclasses import dataclass

KINDS = ("pass", "checker", "interpreter", "quantizer", "emitter", "export", "frontend", "app")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    original: str
    replacement: str
    kind: str
    tests: tuple
    semantic: bool | None = None   # pass mutants only: True when the deployed graph computes something else
    examples: tuple = ()           # pass mutants: runtime examples to try first (names in mutation.EXAMPLES)
    why: str = ""                  # the bug, in words


FOLD = "spikec/passes/fold_batchnorm.py"
FUSE = "spikec/passes/fuse_repconv.py"
TDM = "spikec/passes/tdm_dual_kernel.py"
UNROLL = "spikec/passes/unroll_virtual_steps.py"
ATTN = "spikec/passes/reassociate_attention.py"
CHECKER = "spikec/core/checker.py"
NEURONS = "spikec/ops/neurons.py"           # the interpreter's kernels
TEMPORAL = "spikec/ops/temporal.py"
FIXED_POINT = "spikec/targets/lava/fixed_point.py"
LAVA_NEURONS = "spikec/targets/lava/neurons.py"
ASSEMBLE = "spikec/targets/lava/assemble.py"
SELFCHECK = "spikec/targets/lava/selfcheck.py"
LOWER = "spikec/targets/lava/lower.py"
LAYOUT = "spikec/targets/lava/layout.py"
COMPARE = "spikec/targets/lava/compare.py"
LAVA_OPS = "spikec/targets/lava/ops.py"
ONNX = "spikec/targets/onnx/emitters.py"
NIR = "spikec/targets/nir/export.py"
SERIAL = "spikec/core/serialize.py"

T_FOLD = ("tests/passes/test_fold_batchnorm_rules.py", "tests/passes/test_fold_batchnorm.py")
KILL_PASSES = "tests/passes/test_mutation_killers_passes.py"      # tests written for survivors of this list
KILL_COMPILER = "tests/core/test_mutation_killers_compiler.py"
KILL_LAVA = "tests/targets/lava/test_mutation_killers_lava.py"

T_FUSE = ("tests/passes/test_fuse_repconv.py", KILL_PASSES)
T_TDM = ("tests/passes/test_tdm_dual_kernel.py",)
T_UNROLL = ("tests/passes/test_unroll_virtual_steps.py",)
T_ATTN = ("tests/passes/test_reassociate_attention.py", KILL_PASSES)
T_CHECKER = ("tests/core/test_checker.py", "tests/core/test_pass_manager.py", KILL_COMPILER)
T_INTERP = ("tests/core/test_interpreter.py", KILL_COMPILER)
T_QUANT = ("tests/targets/lava/test_quantize.py", "tests/targets/lava/test_selfcheck.py", KILL_LAVA)
T_LAVA = ("tests/targets/lava/test_quantize.py", "tests/targets/lava/test_selfcheck.py",
          "tests/targets/lava/test_lava_target.py")
T_ONNX = ("tests/targets/onnx/test_onnx_ops.py",)
T_NIR = ("tests/targets/nir/test_nir_export.py", "tests/targets/nir/test_nir_interpreter.py")
T_SERIAL = ("tests/ir/test_graph.py",)

SDNA = ("sdna-event-linear", "sdna-static-linear", "sdna-event-pairwise", "sdna-static-pairwise")


def _pass(id, file, original, replacement, tests, semantic, examples=(), why=""):
    return Mutant(id, file, original, replacement, "pass", tuple(tests), semantic, tuple(examples), why)


def _m(id, kind, file, original, replacement, tests, why=""):
    return Mutant(id, file, original, replacement, kind, tuple(tests), None, (), why)


MUTANTS: tuple[Mutant, ...] = (
    # -- fold_batchnorm ------------------------------------------------------------------------------
    _pass("fold-forgets-mean", FOLD,
          "return w * s.reshape(-1, *([1] * (w.ndim - 1))), (b - mean) * s + beta",
          "return w * s.reshape(-1, *([1] * (w.ndim - 1))), b * s + beta",
          T_FOLD, True, ("digits", "sdt"), "Conv->BN folds the bias without subtracting the running mean"),
    _pass("fold-heaviside-negative-gamma", FOLD,
          "threshold = np.where(s == 0, theta, (theta - c) / np.abs(safe))",
          "threshold = np.where(s == 0, theta, (theta - c) / safe)",
          T_FOLD, True, ("rules", "digits"), "BN->Heaviside divides by s, not |s|: gamma < 0 gets a wrong-signed threshold"),
    _pass("fold-neuron-bias-forgets-alpha", FOLD,
          'new = {**p, "alpha": p["alpha"] * s, "bias": p["alpha"] * shift + p["bias"]}',
          'new = {**p, "alpha": p["alpha"] * s, "bias": shift + p["bias"]}',
          T_FOLD, True, ("sdna-event-linear",), "BN->LIF/intfire: the BN shift enters the neuron without its gain"),
    _pass("fold-into-next-unscaled", FOLD,
          "return w * s.reshape(shape), b + (w * c.reshape(shape)).reshape(w.shape[0], -1).sum(1)",
          "return w, b + (w * c.reshape(shape)).reshape(w.shape[0], -1).sum(1)",
          T_FOLD, True, ("rules",), "BN->unpadded conv folds the shift but forgets to scale the input channels"),
    _pass("fold-into-padded-conv", FOLD,
          'if nxt.op == "conv2d" and (any(nxt.attrs["padding"]) or nxt.attrs["groups"] != 1):',
          'if nxt.op == "conv2d" and nxt.attrs["groups"] != 1:',
          T_FOLD, True, ("rules",), "BN folded into a zero-padded conv: the padded zeros move at the border"),
    _pass("fold-bntt-shift-check", FOLD,
          "if np.all(shift == shift[0]):",
          "if np.all(s == s[0]):",
          T_FOLD, True, ("rules", "ripe"), "BNTT: time-varying shifts folded as one constant bias (tests the scale, not the shift)"),
    # -- fuse_repconv ----------------------------------------------------------------------------------
    _pass("repconv-branch-bias-unscaled", FUSE,
          "b = c if b is None else b * s + c",
          "b = c if b is None else b + c",
          T_FUSE, True, ("rules", "ripe"), "a branch conv's bias passes its BN unscaled (b + c for b*s + c)"),
    _pass("repconv-avgpool-mixes-channels", FUSE,
          "k[np.arange(c), np.arange(c)] = 1.0 / 9.0",
          "k[:, :] = 1.0 / 9.0",
          T_FUSE, True, ("ripe",), "the avg-pool branch kernel averages across channels too"),
    _pass("repconv-identity-off-centre", FUSE,
          "k[np.arange(c), np.arange(c), 1, 1] = 1.0",
          "k[np.arange(c), np.arange(c), 0, 0] = 1.0",
          T_FUSE, True, ("ripe",), "the identity branch kernel taps the corner, not the centre"),
    _pass("repconv-pad-one-side", FUSE,
          "return np.pad(w, ((0, 0), (0, 0), (ph, ph), (pw, pw)))",
          "return np.pad(w, ((0, 0), (0, 0), (2 * ph, 0), (2 * pw, 0)))",
          T_FUSE, True, ("ripe",), "1x1/1x3/3x1 kernels padded to 3x3 asymmetrically (off-centre)"),
    _pass("repconv-accepts-uncentred", FUSE,
          "return all(k in (1, 3) and p == (k - 1) // 2 for k, p in zip(ks, pads))",
          "return all(k in (1, 3) for k, p in zip(ks, pads))",
          T_FUSE, True, ("rules", "ripe"), "an unpadded (not centred) branch conv is fused as if padded (k-1)/2"),
    _pass("repconv-count-include-pad-ignored", FUSE,
          'if not a["count_include_pad"]:',
          'if a["count_include_pad"] is None:',
          T_FUSE, True, ("rules", "ripe"), "avg-pool with count_include_pad=False fused as a convolution (wrong at borders)"),
    _pass("repconv-compose-transposed", FUSE,
          'return np.einsum("omhw,mi->oihw", w3, w1[:, :, 0, 0])',
          'return np.einsum("omhw,im->oihw", w3, w1[:, :, 0, 0])',
          T_FUSE, True, ("ripe",), "1x1 -> 3x3 composition uses the transposed 1x1 weight"),
    _pass("repconv-bias-between-1x1-3x3", FUSE,
          'elif kind == "1x1" and b is None and wt.shape[2:] == (3, 3):',
          'elif kind == "1x1" and wt.shape[2:] == (3, 3):',
          T_FUSE, True, ("rules", "ripe"), "a 1x1 -> 3x3 branch with a bias between them is fused (inexact at the border)"),
    # -- tdm_dual_kernel -------------------------------------------------------------------------------
    _pass("tdm-past-kernel-sign", TDM,
          'params={"weight": -w_b}',
          'params={"weight": w_b}',
          T_TDM, True, ("ripe",), "the x_{t-1} kernel is added instead of subtracted"),
    _pass("tdm-lambda-output-axis", TDM,
          "lam = lam.reshape(1, -1, 1, 1)",
          "lam = lam.reshape(-1, 1, 1, 1)",
          T_TDM, True, ("ripe",), "lambda scales output channels instead of input channels"),
    _pass("tdm-delay-two-steps", TDM,
          '"delay", (x.name,), x.type, {"steps": 1}, {}, tdm.scope)',
          '"delay", (x.name,), x.type, {"steps": 2}, {}, tdm.scope)',
          T_TDM, True, ("ripe",), "the previous-step operand is delayed by two steps"),
    # -- unroll_virtual_steps --------------------------------------------------------------------------
    _pass("unroll-bias-every-substep", UNROLL,
          'params={k: v for k, v in consumer.params.items() if k != "bias"})',
          "params=dict(consumer.params))",
          T_UNROLL, True, SDNA, "the synapse keeps its bias on the sub-steps and the sum adds it again"),
    _pass("unroll-biased-synapse-in-region", UNROLL,
          'elif "bias" in c.params or (c.op == "linear" and len(c.type.shape) > 1):',
          'elif c.op == "linear" and len(c.type.shape) > 1:',
          T_UNROLL, True, SDNA, "a biased synapse joins the sub-step region: its bias counted D times"),
    _pass("unroll-schedule-off-by-one", UNROLL,
          'start[i] + (graph.node(i).type.substeps if n.op == "substep_sum" else 0)',
          'start[i] + (graph.node(i).type.substeps - 1 if n.op == "substep_sum" else 0)',
          T_UNROLL + ("tests/examples/test_sdna_example.py",), False, (),
          "the reported schedule starts each layer one sub-step early (report only)"),
    # -- reassociate_attention -------------------------------------------------------------------------
    _pass("attention-cost-inverted", ATTN,
          'best = "linear" if cost["linear"] < cost["pairwise"] else "pairwise"',
          'best = "linear" if cost["linear"] > cost["pairwise"] else "pairwise"',
          T_ATTN + ("tests/examples/test_sdt.py",), False, (),
          "picks the more expensive order (same values, more MACs)"),
    _pass("attention-swaps-q-k", ATTN,
          'return a.inputs[0], a.inputs[1], b.name, "pairwise", a',
          'return a.inputs[1], a.inputs[0], b.name, "pairwise", a',
          T_ATTN, True, ("rules", "sdt"), "Q and K^T swapped when re-associating (Q V instead of K^T V)"),
    _pass("attention-shared-product", ATTN,
          'if a.op == "matmul" and sole_consumer(graph, a.name) is not None:',
          'if a.op == "matmul":',
          T_ATTN, True, ("rules", "sdt"), "re-associates a Q K^T that another node also reads"),
    # -- checker ---------------------------------------------------------------------------------------
    _m("checker-ignores-last-step", "checker", CHECKER,
       "bad = expected != got",
       "bad = expected[:-1] != got[:-1]",
       T_CHECKER, "spike comparison skips the last time step"),
    _m("checker-tolerance-inclusive", "checker", CHECKER,
       "bad = (diff > tol) | (~finite & (expected != got) & ~both_nan)",
       "bad = (diff >= tol) | (~finite & (expected != got) & ~both_nan)",
       T_CHECKER, "a relative difference of exactly REL_TOL counts as a mismatch ('within 1e-9' is inclusive)"),
    _m("checker-ignores-nonfinite", "checker", CHECKER,
       "bad = (diff > tol) | (~finite & (expected != got) & ~both_nan)",
       "bad = diff > tol",
       T_CHECKER, "NaN/Inf where the other side is finite is not a mismatch"),
    _m("checker-equivalent-ignores-reals", "checker", CHECKER,
       "return self.spike_mismatches == 0 and self.real_mismatches == 0",
       "return self.spike_mismatches == 0",
       T_CHECKER, "real-valued mismatches do not make a comparison non-equivalent"),
    _m("checker-skips-renamed-outputs", "checker", CHECKER,
       "if oa != ob or oa not in {n.name for n in shared}:",
       "if oa != ob and oa not in {n.name for n in shared}:",
       T_CHECKER, "an output renamed by a pass is not compared"),
    _m("checker-substep-grouping", "checker", CHECKER,
       "return x.reshape(x.shape[0] // substeps, substeps, *x.shape[1:]).sum(1)",
       "return x.reshape(substeps, x.shape[0] // substeps, *x.shape[1:]).sum(0)",
       T_CHECKER + T_UNROLL, "sub-steps summed across the wrong axis (strided, not consecutive)"),
    # -- interpreter -----------------------------------------------------------------------------------
    _m("interp-lif-strict-threshold", "interpreter", "spikec/ops/common.py",
       "return self.spikes[t].copy_(d >= 0)",
       "return self.spikes[t].copy_(d > 0)",
       T_INTERP, "LIF fires on U > theta instead of U >= theta"),
    _m("interp-lif-reset-swapped", "interpreter", NEURONS,
       'subtract = node.attrs["reset"] == "subtract"',
       'subtract = node.attrs["reset"] == "zero"',
       T_INTERP, "subtract and hard reset swapped"),
    _m("interp-lif-no-decay", "interpreter", NEURONS,
       "u = out.membrane[t].add_(torch.mul(beta, h, out=tmp)).add_(bias)",
       "u = out.membrane[t].add_(h).add_(bias)",
       T_INTERP, "LIF forgets its decay beta"),
    _m("interp-intfire-always-rounds", "interpreter", NEURONS,
       'offset = 0.5 if node.attrs["rounding"] == "round" else 0.0',
       "offset = 0.5",
       T_INTERP, "integer neuron rounds even when rounding='floor'"),
    _m("interp-thermometer-off-by-one", "interpreter", NEURONS,
       "spikes[t * d_max + d] = (q > d).to(x.dtype)",
       "spikes[t * d_max + d] = (q >= d).to(x.dtype)",
       T_INTERP + T_UNROLL, "unrolled neuron's thermometer code fires one sub-step too many"),
    _m("interp-silif-reset-after-decay", "interpreter", NEURONS,
       "z = torch.sub(u, torch.mul(s, kappa, out=tmp), out=tmp)\n        u = out.membrane[t].add_(z.mul_(a))",
       "z = torch.mul(u, a, out=tmp).sub_(torch.mul(s, kappa))\n        u = out.membrane[t].add_(z)",
       T_INTERP, "SiLIF subtracts its reset after the decay instead of before"),
    _m("interp-tdm-first-step", "interpreter", TEMPORAL,
       "out[0].sub_(torch.mul(lam, torch.zeros_like(x[0])))",
       "out[0].sub_(torch.mul(lam, x[0]))",
       T_INTERP, "TDM's x_{-1} is x_0 instead of 0"),
    _m("interp-delay-ignores-substeps", "interpreter", TEMPORAL,
       'k = min(node.attrs["steps"] * node.type.substeps, x.shape[0])',
       'k = min(node.attrs["steps"], x.shape[0])',
       T_INTERP + T_UNROLL, "Delay(k) on a sub-step stream delays k sub-steps, not k physical steps"),
    # -- Lava quantizer and its self-checks ---------------------------------------------------------------
    _m("quant-weights-floor", "quantizer", FIXED_POINT,
       "wq_f = np.round(w * scale.reshape(channel_axis(w)))",
       "wq_f = np.floor(w * scale.reshape(channel_axis(w)))",
       T_QUANT, "weights floored instead of rounded to nearest"),
    _m("quant-weights-trunc", "quantizer", FIXED_POINT,
       "wq_f = np.round(w * scale.reshape(channel_axis(w)))",
       "wq_f = np.trunc(w * scale.reshape(channel_axis(w)))",
       T_QUANT, "weights truncated toward zero instead of rounded to nearest"),
    _m("quant-weight-exp-off-by-one", "quantizer", FIXED_POINT,
       "emitted, wexp = 2 * wq, -1",
       "emitted, wexp = 2 * wq, 0",
       T_QUANT, "mixed-sign Dense weights emitted as 2w with weight_exp 0: every sum doubled"),
    _m("quant-bias-forgets-64", "quantizer", LAVA_NEURONS,
       "bias_v = to_int(np.round(64 * scale * b / pop.bias_unit) * pop.bias_unit",
       "bias_v = to_int(np.round(scale * b / pop.bias_unit) * pop.bias_unit",
       T_QUANT, "neuron bias not shifted into the membrane's 64x units"),
    _m("quant-decay-inverted", "quantizer", LAVA_NEURONS,
       "return to_int(np.clip(np.round(4096 * (1 - beta)), 0, DECAY_MAX)",
       "return to_int(np.clip(np.round(4096 * beta), 0, DECAY_MAX)",
       T_QUANT, "dv = 4096 beta instead of 4096 (1 - beta)"),
    _m("quant-readout-bias-unscaled", "quantizer", ASSEMBLE,
       "bq = to_int(np.round(pop.bias * scale)",
       "bq = to_int(np.round(pop.bias)",
       T_QUANT, "read-out bias not multiplied by the layer scale"),
    _m("quant-membrane-gain-csilif", "quantizer", LAVA_NEURONS,
       'return 64 * pop.scale / (2 if pop.kind == KIND_CSILIF else 1)',
       "return 64 * pop.scale",
       ("tests/targets/lava/test_lava_mapping.py",) + T_QUANT,
       "a host reading a CSiLIF membrane gets twice its value (threshold on 2 Re m)"),
    _m("selfcheck-accepts-late-start", "quantizer", SELFCHECK,
       'elif start != implied or recorded.get(p["name"], start) != start:',
       'elif start < implied or recorded.get(p["name"], start) != start:',
       ("tests/targets/lava/test_selfcheck.py",), "the schedule self-check lets a late population pass"),
    # -- Lava emitter, integer reference, comparison -------------------------------------------------------
    _m("lava-population-starts-late", "emitter", LOWER,
       'phi, emit = max(o["phi"] + l + o["emit"] - 1 for o, l in zip(origins, lat)), 1',
       'phi, emit = max(o["phi"] + l + o["emit"] for o, l in zip(origins, lat)), 1',
       ("tests/targets/lava/test_selfcheck.py", "tests/targets/lava/test_lava_target.py"),
       "every population starts one Lava step late (Lava and the reference shift together)"),
    _m("lava-conv-not-flipped", "emitter", LAYOUT,
       "return np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(0, 3, 2, 1))",
       "return np.ascontiguousarray(w.transpose(0, 3, 2, 1))",
       ("tests/targets/lava/test_quantize.py", "tests/targets/lava/test_lava_target.py"),
       "PyTorch cross-correlation kernel handed to Lava's true convolution unflipped"),
    _m("lava-flatten-order", "emitter", LAYOUT,
       "return np.arange(int(np.prod(ir_shape))).reshape(ir_shape).transpose(2, 1, 0).reshape(-1)",
       "return np.arange(int(np.prod(ir_shape)))",
       ("tests/targets/lava/test_quantize.py", "tests/targets/lava/test_lava_target.py"),
       "a Dense after a flattened conv population keeps PyTorch's (C, H, W) column order"),
    _m("lava-schedule-ignores-substeps", "emitter", COMPARE,
       "return start + (j // substeps) * period + (j % substeps)",
       "return start + j * period",
       ("tests/targets/lava/test_lava_mapping.py",),
       "the comparison reads sub-step values at physical-step spacing"),
    _m("lava-ref-lif-inclusive", "emitter", LAVA_OPS,
       "s = fired > level",
       "s = fired >= level",
       T_LAVA, "the integer reference fires on v >= vth << 6 where Lava's LIF needs v > vth << 6"),
    _m("lava-ref-decay-floor", "emitter", LAVA_OPS,
       "return np.sign(y) * (np.abs(y) >> 12)",
       "return y >> 12",
       T_LAVA, "the integer reference decays by floor, Lava rounds toward zero"),
    # -- ONNX emitters ---------------------------------------------------------------------------------
    _m("onnx-fire-strict", "emitter", ONNX,
       'return b.spike(b.op("GreaterOrEqual", [b.sub(u, theta), b.const(0.0, "zero")]))',
       'return b.spike(b.op("Greater", [b.sub(u, theta), b.const(0.0, "zero")]))',
       T_ONNX, "ONNX neurons fire on U > theta"),
    _m("onnx-lif-subtract-reset", "emitter", ONNX,
       "h = b.sub(u, b.mul(theta, s))",
       "h = b.sub(u, theta)",
       T_ONNX, "subtract reset applied whether or not the neuron spiked"),
    _m("onnx-delay-advances", "emitter", ONNX,
       'head = b.op("Slice", [x, b.ints([0]), b.ints([length - k]), b.ints([0])], hint=f"{hint}/head")',
       'head = b.op("Slice", [x, b.ints([k]), b.ints([length]), b.ints([0])], hint=f"{hint}/head")',
       T_ONNX, "Delay takes the last T-k steps (a look-ahead) instead of the first"),
    _m("onnx-thermometer-off-by-one", "emitter", ONNX,
       'spikes.append(b.spike(b.op("Greater", [q, b.const(float(d), f"d{d}")])))',
       'spikes.append(b.spike(b.op("GreaterOrEqual", [q, b.const(float(d), f"d{d}")])))',
       T_ONNX, "unrolled neuron fires on q >= d"),
    _m("onnx-avgpool-divisor", "emitter", ONNX,
       "return (np.outer(fh, fw) if count_include_pad else np.outer(ih, iw)).astype(np.float64)",
       "return np.outer(fh, fw).astype(np.float64)",
       T_ONNX, "avg-pool divides by the padded window even with count_include_pad=False"),
    # -- NIR exporter, serialization -------------------------------------------------------------------
    _m("nir-hard-reset-threshold-tie", "export", "spikec/targets/nir/forms.py",
       "    dt, below = form.dt, np.nextafter(theta, -np.inf)\n    if form.scheme == \"norse\":  # Norse's LIF has no r",
       "    dt, below = form.dt, theta\n    if form.scheme == \"norse\":  # Norse's LIF has no r",
       T_NIR, "hard-reset LIF written with v_threshold = theta: NIR's strict > loses U == theta"),
    _m("nir-subtract-threshold-tie", "export", NIR,
       "spikes = self.add(node.name, nir.Threshold(threshold=np.nextafter(theta, -np.inf)))",
       "spikes = self.add(node.name, nir.Threshold(threshold=theta))",
       T_NIR, "subtract-reset neuron's Threshold at theta: ties lost"),
    _m("nir-feedback-forgets-beta", "export", NIR,
       "fb = -beta * theta / alpha",
       "fb = -theta / alpha",
       T_NIR, "subtract-reset feedback -theta/alpha instead of -beta theta/alpha"),
    _m("nir-or-threshold", "export", NIR,
       "v_threshold=np.full(shape, 0.5), v_reset=np.zeros(shape))",
       "v_threshold=np.full(shape, 1.0), v_reset=np.zeros(shape))",
       T_NIR, "max-pool OR neuron needs two spikes in the window (v > 1)"),
    _m("serialize-drops-meta", "export", SERIAL,
       '"meta": thaw(graph.meta),',
       '"meta": {},',
       T_SERIAL, "graph.json loses the graph's meta (schedule, module outputs, attention decisions)"),
    _m("serialize-float32", "export", SERIAL,
       'arrays = {f"{n.name}/{k}": v for n in graph.nodes for k, v in n.params.items()}',
       'arrays = {f"{n.name}/{k}": v.astype(np.float32) for n in graph.nodes for k, v in n.params.items()}',
       T_SERIAL, "weights.npz written in float32"),
)


# -- blind spots: one-line bugs in code added late, each in a check no other test drove with its trigger ----
# (tests/**/test_blind_spots*.py were written for them; ``mutation.py --set blind-spots --exclude-tests
# '*blind_spots*'`` shows what the other tests alone kill.) The first test file of each is the one written for it.
# Measured with --no-runtime: the other tests alone killed 17 of these 50 (0 of the first nine); with the
# blind-spot tests, all 50 (--keep-tests '*blind_spots*' alone kills 45; the other five die by the older files).
B_APP = "tests/app/test_blind_spots.py"
B_LAVA = "tests/targets/lava/test_blind_spots_lava.py"
B_ONNX = "tests/targets/onnx/test_blind_spots_onnx.py"
B_FRONT = "tests/frontend/test_blind_spots_frontend.py"
B_NIR = "tests/targets/nir/test_blind_spots_nir.py"
B_PRODUCTS = "tests/targets/lava/test_blind_spots_products.py"
B_TTFS = "tests/targets/lava/test_blind_spots_ttfs.py"
OUTDIR = "spikec/app/outdir.py"
PRODUCTS, AND, REPORT = ("spikec/targets/lava/products.py", "spikec/targets/lava/and_neurons.py",
                         "spikec/targets/lava/product_report.py")
TTFS_TARGET, TTFS_REF = "spikec/targets/lava/ttfs_target.py", "spikec/targets/lava/ttfs_reference.py"
CUBA, STREAMING, STEPPING = "spikec/formats/nir/cuba.py", "spikec/targets/onnx/streaming.py", "spikec/frontend/stepping.py"
EXACT = "spikec/targets/lava/exact_source.py"
T_PRODUCTS = "tests/targets/lava/test_sdna_sdt_lava.py"
T_TTFS = "tests/targets/lava/test_ttfs_lava.py"
T_CUBA = ("tests/targets/nir/test_nir_consumers_export.py", "tests/targets/test_nir_paper_targets.py")

BLIND_SPOTS: tuple[Mutant, ...] = (
    # (a)-(i): the blind spots the acceptance run found
    _m("and-readout-any-weight-unscaled", "quantizer", "spikec/targets/lava/and_neurons.py",
       'graph.node(s.source).op == "and_gate" and np.isin(s.op.weight, (0.0, 1.0)).all()',
       'graph.node(s.source).op == "and_gate"',
       (B_LAVA, "tests/targets/lava/test_sdna_sdt_lava.py"),
       "a read-out of AND spikes through real weights deployed unscaled (weights round to 0/1; bit_exact stays "
       "true, Lava and the reference share the integers)"),
    _m("exact-verify-ignores-extra-arrays", "checker", "spikec/targets/lava/exact_source.py",
       "lowered = [k for k in sorted(set(fresh) | set(arrays))",
       "lowered = [k for k in sorted(set(fresh))",
       (B_LAVA, "tests/targets/lava/test_exact_source.py"),
       "exact-source verify ignores an array in OUTDIR the lowering never wrote"),
    _m("norse-reset-not-shifted", "quantizer", "spikec/targets/lava/framework_neurons.py",
       'else "subtract", v_reset=get("v_reset") - v_leak,',   # the feed-forward LIF (the recurrent one has its own)
       'else "subtract", v_reset=get("v_reset"),',
       (B_LAVA, "tests/targets/lava/test_framework_neurons.py"),
       "a Norse LIF resets its v_leak-shifted state to v_reset unshifted (only a loose spike agreement sees it)"),
    _m("outdir-ancestor-rule-dropped", "app", OUTDIR,
       "if real == p or real in p.parents:",
       "if real == p:",
       (B_APP, "tests/app/test_outdir.py"),
       "an OUTDIR that contains the cwd or a file the compile reads is accepted (the refusal of an unowned non-empty "
       "directory fired first in the old test)"),
    _m("outdir-missing-equivalent-overwritten", "app", OUTDIR,
       '.get("equivalent") is not False',
       '.get("equivalent") is True',
       (B_APP, "tests/app/test_outdir.py"),
       "an OUTDIR whose report lacks 'equivalent' is overwritten by a failed compile (it should be kept)"),
    _m("plif-zero-decay-not-warned", "app", "spikec/frontend/spikingjelly.py",   # lif_sj's decay rule, on its card
       'decay=Decay(lif_sj_decays), state=("v",)',
       'decay=Decay(lif_sj_decays, zero_ok=True), state=("v",)',
       (B_APP, "tests/app/test_vacuity.py"),
       "a ParametricLIFNode with decay k = 1 (membrane decay 0: memoryless) gets no warning"),
    _m("streaming-limit-longest-table", "export", "spikec/targets/onnx/streaming.py",
       "return min((r for r in map(table_rows, graph.nodes) if r is not None), default=None)",
       "return max((r for r in map(table_rows, graph.nodes) if r is not None), default=None)",
       (B_ONNX, "tests/targets/onnx/test_onnx_streaming.py"),
       "the step model's max_steps is the longest per-step table, not the shortest (the stream fails before it)"),
    _m("step-reset-skips-syn", "frontend", "spikec/frontend/stepping.py",
       'SNNTORCH_HIDDEN = ("spk", "syn", "syn_exc", "syn_inh", "mem")',
       'SNNTORCH_HIDDEN = ("spk", "syn_exc", "syn_inh", "mem")',
       (B_FRONT, "tests/frontend/test_snntorch_step.py"),
       "--stepping step leaves snnTorch Synaptic's syn from the previous run (a second run starts elsewhere)"),
    _m("verify-trusts-outdir-pickle", "app", "spikec/app/verify.py",
       "        weights = weights or copied\n        if weights == copied:\n            trust_pickle = False",
       "        weights = weights or copied\n        if weights is None:\n            trust_pickle = False",
       (B_APP, "tests/app/test_verify_trust.py"),
       "verify --trust-pickle unpickles OUTDIR/source/weights.pt (it may only unpickle verify's own --weights)"),
    # beyond the list: more one-line bugs planted in the same round's code (products, AND neurons, the products
    # report, TTFS on Lava, NIR CubaLIF, streaming, stepping, OUTDIR, exact-source and calibrated verify)
    _m("and-limit-exclusive", "quantizer", PRODUCTS,
       'return "and" if _and_neurons(g, n) <= MAX_AND_NEURONS else "host"',
       'return "and" if _and_neurons(g, n) < MAX_AND_NEURONS else "host"',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "a product needing exactly MAX_AND_NEURONS AND neurons goes to the host"),
    _m("and-neurons-matmul-forgets-columns", "quantizer", PRODUCTS,
       'return int(np.prod(a)) if n.op == "mul" else int(np.prod(a)) * int(b[-1])',
       'return int(np.prod(a)) if n.op == "mul" else int(np.prod(a))',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "a matmul's AND neuron count forgets its columns (the size limit is checked too low)"),
    _m("and-matmul-operands-swapped", "quantizer", PRODUCTS,
       "(sa, ia), (sb, ib) = _trace(g, n.inputs[0]), _trace(g, n.inputs[1])",
       "(sa, ia), (sb, ib) = _trace(g, n.inputs[1]), _trace(g, n.inputs[0])",
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "a binary matmul's AND neurons select B as the left operand (B A for A B)"),
    _m("window-pad-ignores-dilation", "quantizer", PRODUCTS,
       "pad = d * (k - 1) // 2",
       "pad = (k - 1) // 2",
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "the all-equal window conv of a dilated windowsum is padded as if undilated"),
    _m("window-scale-offset-folded", "quantizer", PRODUCTS,
       'if len(cons) == 1 and cons[0].op == "scale" and float(cons[0].attrs.get("b", 0.0)) == 0.0 \\',
       'if len(cons) == 1 and cons[0].op == "scale" \\',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "windowsum then scale(a, b != 0) becomes a conv of weight a: the offset b is lost"),
    _m("rewrite-check-any-output", "checker", PRODUCTS,
       '"outputs_equal": all(v == 0 for v in diffs.values())',
       '"outputs_equal": any(v == 0 for v in diffs.values())',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "the products rewrite is called exact when any one output is equal"),
    _m("host-nodes-early", "quantizer", PRODUCTS,
       "key = lambda name: (g.node(name).op in HOST, index[name])",
       "key = lambda name: (g.node(name).op not in HOST, index[name])",
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "host nodes ordered as early as possible (a host region before the AND counts it reads)"),
    _m("and-gate-fires-on-one", "quantizer", AND,
       'define("and_gate", 1, _infer_and, kernel=lambda ctx, node, p, x: (x >= BOTH)',
       'define("and_gate", 1, _infer_and, kernel=lambda ctx, node, p, x: (x >= BOTH - 1)',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "the float AND neuron fires when either operand spiked (an OR)"),
    _m("lava-and-strict", "quantizer", AND,
       'define("lava_and", 1, _infer_and, kernel=lambda ctx, node, p, x: (x >= BOTH)',
       'define("lava_and", 1, _infer_and, kernel=lambda ctx, node, p, x: (x > BOTH)',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "the integer reference's AND population never fires"),
    _m("and-readout-bias-unscaled", "quantizer", AND,
       "and not s.op.bias.any() for s in pop.streams",
       "for s in pop.streams",
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "a read-out of AND spikes with a bias deployed unscaled (the bias rounds to an integer)"),
    _m("synops-fan-in", "emitter", REPORT,
       "fan = (w != 0).sum(0).astype(np.float64)",
       "fan = (w != 0).sum(1).astype(np.float64)",
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "synaptic ops count each input's fan-in instead of its fan-out"),
    _m("host-macs-matmul-no-inner", "emitter", REPORT,
       '"matmul": lambda out, ins, attrs: int(np.prod(out)) * int(ins[0][-1]),',
       '"matmul": lambda out, ins, attrs: int(np.prod(out)),',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "a host matmul counts one MAC per output, not its inner dim per output"),
    _m("chip-spikes-not-per-sample", "emitter", REPORT,
       '"spikes_per_inference": round(spikes / samples, 3)',
       '"spikes_per_inference": round(spikes, 3)',
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "chip spikes per inference summed over every sample"),
    _m("report-steps-ignore-substeps", "emitter", REPORT,
       'return int(np.asarray(v).shape[0] // max(1, r.get("substeps", 1)))',
       "return int(np.asarray(v).shape[0])",
       (B_PRODUCTS, B_LAVA, T_PRODUCTS), "physical steps counted as Lava sub-steps (host work per inference D times too high)"),
    _m("ttfs-double-spike-ignored", "checker", TTFS_TARGET,
       "mismatches += len(bad) + int(most > 1)",
       "mismatches += len(bad)",
       (B_TTFS, T_TTFS), "a TTFS neuron that spikes twice in Lava (its tick still equal) is bit-exact"),
    _m("ttfs-dt-need-not-divide", "app", TTFS_TARGET,
       "if abs(k - round(k)) > 1e-9 * k or round(k) < 1:",
       "if round(k) < 1:",
       (B_TTFS, T_TTFS), "--ttfs-dt that does not divide the window is rounded silently"),
    _m("ttfs-ref-fires-at-window-end", "emitter", TTFS_REF,
       "ticks[layer.name] = np.where(m < layer.k_max - layer.k_min, layer.k_min + m, -1)",
       "ticks[layer.name] = np.where(m <= layer.k_max - layer.k_min, layer.k_min + m, -1)",
       (B_TTFS, T_TTFS), "the TTFS reference lets a neuron fire on the tick after its window"),
    _m("ttfs-synops-fan-in", "emitter", TTFS_REF,
       "fan = (layer.wq[i] != 0).sum(1)",
       "fan = (layer.wq[i] != 0).sum(0)",
       (B_TTFS, T_TTFS), "TTFS synaptic ops count fan-in instead of fan-out"),
    _m("cuba-zero-decay-misfit", "export", CUBA,
       "((d >= 0) & (d <= 1))",
       "((d > 0) & (d <= 1))",
       (B_NIR, *T_CUBA), "a CubaLIF with tau = dt (decay 0, Synaptic's clamp allows it) is refused as a misfit"),
    _m("cuba-v-leak-ignored", "export", CUBA,
       '(("v_leak", "a leak"), ("v_reset", "a reset value"))',
       '(("v_reset", "a reset value"),)',
       (B_NIR, *T_CUBA), "a CubaLIF with v_leak != 0 is read as snnTorch's Synaptic (which has no leak)"),
    _m("cuba-negative-threshold-accepted", "export", CUBA,
       "if np.any(np.asarray(node.v_threshold) < 0) or np.any(np.asarray(node.r) <= 0) or \\",
       "if np.any(np.asarray(node.r) <= 0) or \\",
       (B_NIR, *T_CUBA), "a CubaLIF with a negative threshold is read as Synaptic (whose zero reset fires again)"),
    _m("cuba-feedback-shared", "export", CUBA,
       "elif [s for s, d in conv.edges if d == u] != [v] or conv.outs(u) != [v]:",
       "elif [s for s, d in conv.edges if d == u] != [v]:",
       (B_NIR, *T_CUBA), "a CubaLIF feedback Affine that another node also reads is taken as RSynaptic's recurrence"),
    _m("step-init-state-channel-last", "export", STREAMING,
       "v = v.reshape(-1, *([1] * (len(shape) - 1)))",
       "v = v.reshape(*([1] * (len(shape) - 1)), -1)",
       (B_ONNX, "tests/targets/onnx/test_onnx_streaming.py"),
       "a per-channel initial state (Norse v_leak, SpikingJelly v_reset) laid along the last axis"),
    _m("step-model-state-left-behind", "frontend", STEPPING,
       "reset_state(self.model)  # leave no state behind for the next user of the module",
       "pass  # leave no state behind for the next user of the module",
       (B_FRONT, "tests/frontend/test_snntorch_step.py"), "--stepping step leaves its last state in the user's module"),
    _m("step-model-norse-state-not-threaded", "frontend", STEPPING,
       "return len(params) >= 2 and params[1].default is None",
       "return len(params) > 2 and params[1].default is None",
       (B_FRONT, "tests/frontend/test_norse.py"),
       "a Norse SequentialState's forward(x, state) is not seen as threading its state"),
    _m("outdir-cwd-unguarded", "app", OUTDIR,
       "for p in [Path.cwd(), *(Path(r) for r in reads if r)]:",
       "for p in [*(Path(r) for r in reads if r)]:",
       (B_APP, "tests/app/test_outdir.py"), "an OUTDIR spikec owns that holds the current directory is replaced"),
    _m("exact-rederived-ignores-params", "checker", EXACT,
       "rederived = graph_to_json(q) == graph_to_json(q_written) and all(",
       "rederived = graph_to_json(q) == graph_to_json(q_written) or all(",
       (B_LAVA, "tests/targets/lava/test_exact_source.py"),
       "exact-source verify accepts a written integer graph whose structure matches but whose integers differ"),
    _m("exact-readout-bias-dropped", "emitter", EXACT,
       'if "bias" in n.params:\n            self.bias[name] = _ints(n.params["bias"])',
       'if "bias" in n.params and n.name not in self.readouts:\n            self.bias[name] = _ints(n.params["bias"])',
       (B_LAVA, "tests/targets/lava/test_exact_source.py"), "an exact-source Dense read-out loses its bias"),
    _m("verify-lava-ignores-extra-arrays", "checker", "spikec/targets/lava/__init__.py",
       "lowered = [k for k in sorted(set(fresh) | set(arrays))",
       "lowered = [k for k in sorted(set(fresh))",
       (B_LAVA, "tests/targets/lava/test_verify_rederives.py"),
       "verify of a calibrated Lava OUTDIR ignores an array the lowering never wrote"),
    _m("norse-threshold-not-shifted", "quantizer", "spikec/targets/lava/framework_neurons.py",
       'get("threshold") - v_leak, alpha=a_mem,\n              reset="zero" if',   # the feed-forward LIF's
       'get("threshold"), alpha=a_mem,\n              reset="zero" if',
       (B_LAVA, "tests/targets/lava/test_framework_neurons.py"), "a Norse LIF's threshold not shifted by v_leak"),
    _m("norse-state-read-offset-dropped", "quantizer", "spikec/targets/lava/framework_neurons.py",
       'return p.get("v_leak", np.zeros_like(p["beta"]))',
       'return np.zeros_like(p["beta"])',
       (B_LAVA, "tests/targets/lava/test_framework_neurons.py"),
       "a Norse v read from Lava is dequantized without adding back v_leak"),
    _m("session-cache-key-length", "export", "spikec/targets/onnx/sessions.py",
       "key = (hashlib.sha1(data).hexdigest(), threads) if _KEPT is not None else None",
       "key = (len(data), threads) if _KEPT is not None else None",
       (B_ONNX, "tests/targets/onnx/test_sessions.py"), "two models of the same size share one kept session"),
    _m("decay-warned-per-read-out", "app", "spikec/app/vacuity.py",
       "kinds[0] = _decay(node, rule) if same not in decays_seen else None",
       "kinds[0] = _decay(node, rule)",
       (B_APP, "tests/app/test_vacuity.py"), "a neuron's decay warned once per read-out (Norse's v and i twice more)"),
    _m("outdir-file-accepted", "app", OUTDIR,
       "if out.exists() and not out.is_dir():",
       "if out.is_symlink() and not out.is_dir():",
       (B_APP, "tests/app/test_outdir.py"), "-o naming an existing file is accepted (the file is replaced)"),
    _m("publish-skips-ownership-recheck", "app", OUTDIR,
       "if not (is_owned(out) or not any(out.iterdir())):",
       "if not (is_owned(out) or any(out.iterdir())):",
       (B_APP, "tests/app/test_outdir.py"),
       "publish replaces an OUTDIR that stopped being spikec's during the compile (and refuses an empty one)"),
    _m("step-non-tensor-output-accepted", "frontend", STEPPING,
       "if not items or not all(isinstance(o, torch.Tensor) for o in items):",
       "if not items:",
       (B_FRONT, "tests/frontend/test_snntorch_step.py"),
       "a step model returning a dict is not refused by name (torch.stack fails later, unexplained)"),
    _m("step-reset-skips-spikingjelly", "frontend", STEPPING,
       'if any(m.startswith("spikingjelly") for m in modules):',
       'if all(m.startswith("spikingjelly") for m in modules):',
       (B_FRONT, "tests/frontend/test_spikingjelly.py"),
       "--stepping step resets SpikingJelly's neurons only when every module is SpikingJelly's"),
    _m("norse-subtract-negative-leak-accepted", "quantizer", "spikec/targets/lava/framework_neurons.py",
       'if pop.neuron.attrs["reset"] == "subtract" and (p["v_leak"] != 0).any():',
       'if pop.neuron.attrs["reset"] == "subtract" and (p["v_leak"] > 0).any():',
       (B_LAVA, "tests/targets/lava/test_framework_neurons.py"),
       "a Norse LIFBox with reset_subtract and a negative v_leak is deployed (its subtract is wrong)"),
    _m("norse-current-decay-inverted", "quantizer", "spikec/targets/lava/framework_neurons.py",
       '              v_leak=v_leak)\n    if node.attrs["current"]:\n        p.update(u_keep=1.0 - get("dt_tau_syn_inv")',
       '              v_leak=v_leak)\n    if node.attrs["current"]:\n        p.update(u_keep=get("dt_tau_syn_inv")',
       (B_LAVA, "tests/targets/lava/test_framework_neurons.py"),
       "a Norse LIF's current keeps dt/tau_syn of itself instead of 1 - dt/tau_syn"),
    _m("cuba-two-inputs-accepted", "export", CUBA,
       "if len(conv.ins(v)) != 1:",
       "if len(conv.ins(v)) > 2:",
       (B_NIR, *T_CUBA), "a recurrent CubaLIF with two feed-forward inputs is read as RSynaptic (which sums one)"),
    _m("onnx-length-check-dropped", "export", "spikec/targets/onnx/__init__.py",
       "    if fixed != given:",
       "    if fixed < given:",
       (B_ONNX, "tests/targets/onnx/test_onnx_examples.py"),
       "model.onnx checked on shorter inputs than it was exported for: onnxruntime's shape error, not the named refusal"),
)
