"""Quantization to Loihi 2 fixed point and the integer reference ops (no Lava simulation here).

Checks: exact pool folds, Lava's Dense weight handling reproduced (clip, mixed-sign LSB truncation,
the 2w / weight_exp -1 cure), Conv layout/flip round trip, the LIF kernel's du offset, parameter
encodings, refusals naming the node, calibration and overflow detection, and the import shim.
"""
import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from spikec.ir.errors import IRError, UnsupportedOp
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import layout, ops as lops
from spikec.targets.lava.calibrate import measure
from spikec.targets.lava.fixed_point import bias_mant_exp
from spikec.targets.lava.lower import lower
from spikec.targets.lava.ops import with_readouts
from spikec.targets.lava.pooling import fold_conv_then_pool, fold_pool_then_conv
from spikec.targets.lava.quantize import quantize

HERE = Path(__file__).resolve().parent


def _conv(x, w, stride, padding, dilation=(1, 1)):
    return F.conv2d(torch.as_tensor(x), torch.as_tensor(w), None, stride, padding, dilation).numpy()


@pytest.mark.parametrize("stride,padding,dilation,pool", [((1, 1), (1, 1), (1, 1), (2, 2)),
                                                           ((1, 2), (0, 1), (2, 1), (2, 3)),
                                                           ((2, 1), (1, 0), (1, 1), (3, 2))])
def test_conv_then_avgpool_folds_exactly(stride, padding, dilation, pool):
    rng = np.random.default_rng(0)
    x = rng.random((2, 3, 13, 14))
    w = rng.standard_normal((4, 3, 3, 2))
    ref = F.avg_pool2d(torch.as_tensor(_conv(x, w, stride, padding, dilation)), pool).numpy()
    wf, s, p, d = fold_conv_then_pool(w, stride, padding, dilation, pool, pool)
    got = _conv(x, wf, s, p, d)
    n = min(ref.shape[2], got.shape[2]), min(ref.shape[3], got.shape[3])
    assert np.allclose(got[:, :, :n[0], :n[1]], ref[:, :, :n[0], :n[1]], rtol=0, atol=1e-12)


def test_avgpool_then_conv_folds_exactly():
    rng = np.random.default_rng(1)
    x = rng.random((2, 3, 12, 8))
    w = rng.standard_normal((5, 3, 3, 2))
    for stride, padding, dilation in (((1, 1), (1, 1), (1, 1)), ((2, 1), (0, 1), (1, 2))):
        ref = _conv(F.avg_pool2d(torch.as_tensor(x), 2).numpy(), w, stride, padding, dilation)
        wf, s, p, d = fold_pool_then_conv(w, stride, padding, dilation, (2, 2))
        assert np.allclose(_conv(x, wf, s, p, d), ref, rtol=0, atol=1e-12)


def test_dense_weights_reproduce_lavas_clip_and_truncation():
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.utils.weightutils import clip_weights, determine_sign_mode, truncate_weights
    rng = np.random.default_rng(2)
    for w in (rng.integers(-300, 300, (7, 9)), rng.integers(0, 300, (5, 4)), -rng.integers(0, 300, (3, 8)),
              np.array([[75, -3]])):
        mode = determine_sign_mode(w)
        lava = truncate_weights(clip_weights(w, mode, 8), mode, 8)
        assert np.array_equal(lops.dense_effective_weights(w), lava)
    assert lops.dense_effective_weights(np.array([[75, -3]])).tolist() == [[74, -4]]   # the LSB trap
    w = rng.integers(-128, 128, (6, 6))
    assert np.array_equal(lops.dense_effective_weights(2 * w), 2 * w)                  # the 2w cure


def _int_graph(weight, wexp, lif_params, reset="zero"):
    n_out, n_in = weight.shape
    nodes = [Node("input", "input", (), TensorType((n_in,), "binary")),
             Node("syn", "lava_dense", ("input",), TensorType((n_out,)), {"weight_exp": wexp, "num_message_bits": 0},
                  {"weight": weight}),
             Node("pop", "lava_lif", ("syn",), TensorType((n_out,), "binary"),
                  {"reset": reset, "output": "spikes", "process": "SpikecLIF"}, lif_params)]
    return Graph(tuple(nodes), ("pop",))


def test_lif_kernel_du_offset_and_strict_threshold():
    # one input spike of weight 10 at t=0, then silence: u = 640 decays by (4096 - (du + 1)) / 4096
    x = np.zeros((4, 1, 1), dtype=np.int64)
    x[0] = 1
    base = {"dv": np.int64(0), "vth": np.int64(10_000), "bias_mant": np.zeros(1, np.int64),
            "bias_exp": np.zeros(1, np.int64)}
    for du, expect_u in ((-1, [640, 640, 640, 640]), (0, [640, 639, 638, 637]), (4095, [640, 0, 0, 0])):
        g = with_readouts(_int_graph(np.array([[10]]), 0, {**base, "du": np.int64(du)}))
        u = run(g, x, integer=True).values["pop.u"][:, 0, 0]
        assert u.tolist() == expect_u, du
    g = with_readouts(_int_graph(np.array([[1]]), 0, {**base, "du": np.int64(4095), "vth": np.int64(1)}))
    t = run(g, np.ones((2, 1, 1), dtype=np.int64), integer=True)
    assert t.values["pop"][:, 0, 0].tolist() == [0, 1]          # v = 64 is not > 64; v = 128 is


def test_conv_layout_round_trip_and_flatten_order():
    rng = np.random.default_rng(3)
    w = rng.integers(-9, 9, (4, 3, 3, 2))
    lw = layout.conv_weight_to_lava(w)
    assert lw.shape == (4, 2, 3, 3) and lw[1, 0, 0, 2] == w[1, 2, 2, 1]   # flipped, (C_out, kW, kH, C_in)
    assert np.array_equal(layout.conv_weight_from_lava(lw), w)
    x = rng.integers(0, 2, (3, 4, 5))
    assert np.array_equal(layout.to_lava(x).reshape(-1), x.reshape(-1)[layout.flatten_perm((3, 4, 5))])
    data = rng.integers(0, 2, (6, 2, 3, 4, 5))
    assert np.array_equal(layout.unfold_data(layout.fold_data(data), 2, (3, 4, 5)), data)
    data = rng.integers(0, 2, (6, 3, 7))
    assert np.array_equal(layout.unfold_data(layout.fold_data(data), 3, (7,)), data)


def test_lowering_refuses_weights_lava_would_change():
    g = _int_graph(np.array([[75, -3]]), 0, {"du": np.int64(4095), "dv": np.int64(0), "vth": np.int64(5),
                                            "bias_mant": np.zeros(1, np.int64), "bias_exp": np.zeros(1, np.int64)})
    with pytest.raises(IRError, match="alter weight"):
        lower(g)


def test_bias_mantissa_exponent():
    mant, exp, sat = bias_mant_exp(np.array([0, 4095, -4096, 4096, 100_000, -524_288, 10 ** 7]))
    assert (mant <= 4095).all() and (mant >= -4096).all() and sat == 1
    assert (mant[:6] << exp[:6]).tolist() == [0, 4095, -4096, 4096, 100_000, -524_288]


def _fixture():
    spec = importlib.util.spec_from_file_location("lava_test_models", HERE / "models.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _float_graph(factory, batch=3, seed=0, passes="default"):
    from spikec.frontend import trace
    from spikec.core.passes import run_passes
    from spikec.passes import select
    model = getattr(_fixture(), factory)().eval()
    x = (np.random.default_rng(seed).random((model.steps, batch, *model.input_shape)) < 0.3).astype(np.float64)
    g = trace(model, model.input_shape, input_kind="binary")
    g, _ = run_passes(g, select(passes)[0], x)
    return g, x


def test_quantized_parameters_and_per_channel_thresholds():
    g, x = _float_graph("dense_soft")
    q = quantize(g, x)
    lif = q.graph.node("layers.1")
    assert lif.attrs["process"] == "SpikecLIF" and lif.attrs["reset"] == "subtract"
    assert np.asarray(lif.params["vth"]).ndim == 0                   # thresholds normalized into the scales
    assert np.asarray(lif.params["dv"]).shape == (24,)               # per-channel leak -> custom process
    assert int(lif.params["du"]) == 4095
    hard = q.graph.node("layers.3")
    assert hard.attrs["process"] == "LIF"
    syn = q.graph.node("layers.0.0")
    assert syn.attrs["weight_exp"] == -1 and (np.asarray(syn.params["weight"]) % 2 == 0).all()
    assert (np.abs(np.asarray(syn.params["weight"]) // 2) % 2 == 1).any()     # odd mantissas are kept
    float_theta = np.asarray(g.node("layers.1").params["threshold"])
    scale = np.asarray(q.layers[0].scale)
    assert np.allclose(scale * float_theta, int(lif.params["vth"]))
    assert not q.calibration["overflow"]


@pytest.mark.parametrize("factory,node,passes", [("with_graded_maxpool", "layers.2.0", "none")])
# (a product of two spike tensors now maps: AND neurons, tests/targets/lava/test_sdna_sdt_lava.py)
def test_unmappable_nodes_are_refused_by_name(factory, node, passes):
    g, x = _float_graph(factory, batch=1, passes=passes)
    with pytest.raises(UnsupportedOp) as e:
        quantize(g, x)
    node = node or next(n.name for n in g.nodes if n.op == "mul")
    assert repr(node) in str(e.value)


def test_silif_maxpool_and_integer_neurons_now_map():
    for factory, ops in (("with_silif", {"lava_silif"}), ("with_maxpool", {"lava_or", "lava_lif"}),
                         ("intfire_dense", {"lava_intfire"})):
        g, x = _float_graph(factory, batch=1)
        assert ops <= {n.op for n in quantize(g, x).graph.nodes}


def _intfire_graph(unrolled, rounding="round", d=4):
    nodes = [Node("input", "input", (), TensorType((3,), "integer", 20)),
             Node("syn", "lava_dense", ("input",), TensorType((3,)), {"weight_exp": 0, "num_message_bits": 5},
                  {"weight": np.eye(3, dtype=np.int64)}),
             Node("pop", "lava_intfire", ("syn",),
                  TensorType((3,), "binary", None, d) if unrolled else TensorType((3,), "integer", d),
                  {"max_spikes": d, "rounding": rounding, "unrolled": unrolled, "output": "spikes"},
                  {"du": np.int64(4095), "dv": np.int64(0), "vth": np.int64(1), "bias_mant": np.zeros(3, np.int64),
                   "bias_exp": np.zeros(3, np.int64)})]
    return Graph(tuple(nodes), ("pop",))


def test_integer_neuron_kernel_rounding_clip_and_thermometer():
    # vth 1 -> theta = 64 state units = one input unit: v = 64 a; S = clip(round(v / 64), 0, D), v -= 64 S
    x = np.zeros((3, 1, 3), dtype=np.int64)
    x[0] = [1, 2, 9]       # S = 1, 2, 4 (clipped: 9 units, residual 5 carried)
    x[1] = [0, 0, 0]       # residual 5 -> S = 4, residual 1
    g = with_readouts(_intfire_graph(False))
    t = run(g, x, integer=True)
    assert t.values["pop"][:, 0].tolist() == [[1, 2, 4], [0, 0, 4], [0, 0, 1]]
    assert t.values["pop.v"][:, 0, 2].tolist() == [5 * 64, 64, 0]
    half = np.zeros((1, 1, 3), dtype=np.int64)
    h = with_readouts(_intfire_graph(False))      # a tie: U = 1.5 theta rounds half up (2), floor gives 1
    g2 = Graph(h.nodes[:2] + (h.nodes[2].with_(params={**h.nodes[2].params, "vth": np.int64(2)}),) + h.nodes[3:],
               ("pop",))
    half[0] = [3, 1, 0]
    assert run(g2, half, integer=True).values["pop"][0, 0].tolist() == [2, 1, 0]
    floor = _intfire_graph(False, "floor")
    floor = Graph(floor.nodes[:2] + (floor.nodes[2].with_(params={**floor.nodes[2].params, "vth": np.int64(2)}),),
                  ("pop",))
    assert run(floor, half, integer=True).values["pop"][0, 0].tolist() == [1, 0, 0]
    u = run(_intfire_graph(True), x, integer=True).values["pop"]          # thermometer code over D = 4
    assert u.shape == (12, 1, 3) and np.array_equal(u.reshape(3, 4, 1, 3).sum(1), t.values["pop"])
    assert u[:4, 0, 1].tolist() == [1, 1, 0, 0]


def _resonator(op, params, shape=(2,)):
    nodes = [Node("input", "input", (), TensorType(shape, "integer", 9)),
             Node("syn", "lava_dense", ("input",), TensorType(shape), {"weight_exp": 0, "num_message_bits": 4},
                  {"weight": np.eye(shape[0], dtype=np.int64)}),
             Node("pop", op, ("syn",), TensorType(shape, "binary"), {"output": "spikes"}, params)]
    return with_readouts(Graph(tuple(nodes), ("pop",)))


def test_silif_and_csilif_kernels_match_the_float_neurons_when_exact():
    # decays that are exact in 12-bit fractions (1, and a 90 degree rotation) leave no rounding: the integer
    # states are exactly 64 s times the float ones (here s = 1: kappa 0.5 -> K = 32, v_th 2 -> vth 2 on Re m)
    from spikec.ops import KernelContext
    from spikec.ops.neurons import csilif, silif
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, (12, 2, 2))
    zero = np.zeros(2, np.int64)
    g = _resonator("lava_silif", {"decay": np.int64(4096), "vth": np.int64(2), "kappa": np.int64(32),
                                  "bias_mant": zero, "bias_exp": zero})
    got = run(g, x, integer=True).values
    node = Node("f", "silif", ("i",), TensorType((2,), "binary"), {"kappa": 0.5},
                {"decay": np.ones(2), "b": np.ones(2), "threshold": np.full(2, 2.0)})
    k = KernelContext(False, {})
    ref = silif(k, node, {kk: torch.as_tensor(np.array(v)) for kk, v in node.params.items()},
                  torch.as_tensor(x.astype(np.float64)))
    assert np.array_equal(got["pop"], ref.spikes.numpy()) and np.array_equal(got["pop.v"], 64 * ref.membrane.numpy())
    g = _resonator("lava_csilif", {"a_re": np.int64(0), "a_im": np.int64(4096), "vth": np.int64(1),
                                   "kappa": np.int64(32), "bias_mant": zero, "bias_exp": zero})
    got = run(g, x, integer=True).values
    node = Node("f", "csilif", ("i",), TensorType((2,), "binary"), {"kappa": 0.5},
                {"a_re": np.zeros(2), "a_im": np.ones(2), "b": np.ones(2), "threshold": np.full(2, 2.0)})
    ref = csilif(k, node, {kk: torch.as_tensor(np.array(v)) for kk, v in node.params.items()},
                   torch.as_tensor(x.astype(np.float64)))
    assert np.array_equal(got["pop"], ref.spikes.numpy())
    assert np.array_equal(got["pop.v"], 32 * ref.membrane.numpy())      # U = 2 Re m; v = 64 Re m
    assert got["pop"].sum() > 0 and np.abs(got["pop.w"]).sum() > 0


def test_host_step_is_per_sample_and_matches_the_float_kernel():
    from spikec.ops import KernelContext
    from spikec.ops.attention import dsmpa
    from spikec.targets.lava import host
    rng = np.random.default_rng(6)
    c = 3
    params = {"wq": rng.standard_normal((c, c)), "wk": rng.standard_normal((c, c)), "wv": rng.standard_normal((c, c)),
              "gamma": rng.random(c)}
    u, s, x = rng.standard_normal((4, c, 2, 3)), (rng.random((4, c, 2, 3)) < 0.4) * 1.0, rng.standard_normal((4, c, 2, 3))
    y = host.host_step("dsmpa", {"eps": 1e-6}, params, 0, [u, s, x])
    one = np.concatenate([host.host_step("dsmpa", {"eps": 1e-6}, params, 0, [u[i:i + 1], s[i:i + 1], x[i:i + 1]])
                          for i in range(4)])
    assert np.array_equal(y, one)                          # no result depends on how samples are grouped
    node = Node("d", "dsmpa", ("a", "b", "c"), TensorType((c, 2, 3)), {"eps": 1e-6}, params)
    ref = dsmpa(KernelContext(False, {}), node, {k: torch.as_tensor(v) for k, v in params.items()},
                                    *(torch.as_tensor(v[None]) for v in (u, s, x)))
    assert np.allclose(y, ref.numpy()[0], rtol=1e-12, atol=1e-12)


def _wide_graph(n_in=400):
    w = np.full((3, n_in), 0.01)
    nodes = [Node("input", "input", (), TensorType((n_in,), "binary")),
             Node("fc", "linear", ("input",), TensorType((3,)), {}, {"weight": w}),
             Node("lif", "lif", ("fc",), TensorType((3,), "binary"), {"reset": "subtract"},
                  {"beta": 1.0, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0})]
    return Graph(tuple(nodes), ("lif",)), np.ones((4, 2, n_in))


def test_calibration_lowers_the_scale_until_states_have_headroom():
    g, x = _wide_graph()
    q = quantize(g, x)
    per = q.calibration["per_layer"]["lif"]
    assert q.calibration["rounds"] > 1
    assert per["peak_state"] <= q.calibration["state_limit"] and per["overflow_events"] == 0


def test_overflow_is_detected_not_wrapped_silently():
    g, x = _wide_graph(1200)
    q = quantize(g, x, vth_override={"lif": 131071})    # calibration not allowed to lower this scale
    per = q.calibration["per_layer"]["lif"]
    assert q.calibration["overflow"] and per["overflow_events"] > 0
    assert per["u_wrapped"] + per["v_saturated"] + per["input_overflow"] > 0
    peaks, _ = measure(q.graph, {"input": x})
    assert peaks["lif"]["overflow_events"] == per["overflow_events"]


def test_shim_leaves_dataclasses_alone():
    from spikec.targets.lava._shim import import_lava
    mod = import_lava()
    assert dataclasses.dataclass.__module__ == "dataclasses"
    assert mod.ByteEncoder.__hash__ is object.__hash__
    assert mod.CoreEncoder().x is mod.CoreEncoder().x        # lava's (3.10) shared default, unchanged
    assert mod.ChipEncoder.__hash__ is None                  # no other class touched


def test_conv_wraps_and_payload_clips_are_reported_not_silent():
    # graded 16-bit payloads into a 3x3 conv of weight 127: sums reach 9 * 127 * 30000 > 2^23, which Lava's Conv
    # (and the reference) wrap modulo 2^24; a host payload beyond 8 bits is clipped
    nodes = [Node("input", "input", (), TensorType((1, 4, 4), "integer", 30000)),
             Node("conv", "lava_conv", ("input",), TensorType((1, 4, 4)),
                  {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1, "num_message_bits": 16},
                  {"weight": np.full((1, 1, 3, 3), 127)}),
             Node("ro", "lava_readout", ("conv",), TensorType((1, 4, 4)), {}, {"bias": np.zeros(1, np.int64)}),
             Node("pay", "lava_quant", ("input",), TensorType((1, 4, 4)), {"bits": 8}, {"gain": np.float64(0.01)})]
    g = Graph(tuple(nodes), ("ro", "pay"))
    x = np.full((2, 1, 1, 4, 4), 30000)
    peaks, trace = measure(g, {"input": x})
    assert peaks["ro"]["conv_wrapped"] == 2 * 16 and peaks["ro"]["overflow_events"] == 2 * 16
    assert np.abs(trace.values["conv"]).max() < 2 ** 23                     # wrapped, as Lava does
    assert peaks["pay"]["payload_clipped"] == 2 * 16 and peaks["pay"]["peak_payload"] == 127
