"""A read-out over time as the model's output (``x_seq.mean(0)``, ``torch.stack(record).sum(0)``): the IR's
``time_sum`` marked read at the last step, checked against the frameworks' own forward, in onnxruntime, saved and
verified; the checker catches a wrong reduction; the targets and stepping that cannot have it refuse by name."""
import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.core.checker import compare_with_torch
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import read_last, run
from spikec.ir.graph import Graph
from spikec.frontend import trace

RNG = np.random.default_rng(24)


def sj_csnn(reduce="mean"):
    from spikingjelly.activation_based import functional, layer, neuron

    class CSNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Sequential(layer.Conv2d(1, 4, 3, padding=1), neuron.LIFNode(), layer.Flatten(),
                                       layer.Linear(4 * 6 * 6, 5), neuron.LIFNode())
            functional.set_step_mode(self, "m")

        def forward(self, x_seq):
            if reduce == "current sum":   # the read-out layer's currents, not its spikes
                y = self.layer[3](self.layer[2](self.layer[1](self.layer[0](x_seq))))
            else:
                y = self.layer(x_seq)
            return y.mean(0) if reduce == "mean" else y.sum(0)

    torch.manual_seed(0)
    model = CSNN()
    with torch.no_grad():  # as after training: every layer fires, at different rates
        model.layer[0].weight.abs_().mul_(2.0)
        model.layer[3].weight.uniform_(-0.04, 0.06)
    return model


class SnnLoop(nn.Module):
    def __init__(self, reduce="sum"):
        super().__init__()
        import snntorch as snn
        self.reduce = reduce
        self.fc1, self.lif1 = nn.Linear(8, 6), snn.Leaky(beta=0.9)
        self.fc2, self.lif2 = nn.Linear(6, 4), snn.Leaky(beta=0.8)

    def forward(self, x):
        m1, m2 = self.lif1.init_leaky(), self.lif2.init_leaky()
        rec = []
        for t in range(x.shape[0]):
            s1, m1 = self.lif1(self.fc1(x[t]), m1)
            s2, m2 = self.lif2(self.fc2(s1), m2)
            rec.append(s2)
        return torch.stack(rec).sum(0) if self.reduce == "sum" else torch.stack(rec).mean(0)


X_IMG = (RNG.random((6, 2, 1, 6, 6)) < 0.5) * 2.0
X_VEC = (RNG.random((7, 3, 8)) < 0.6) * 2.0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_time_sum_kernel_is_torch_sum_and_mean_bit_for_bit(dtype):
    from spikec.ops.temporal import time_sum
    for steps in (1, 2, 5, 17, 64):
        x = torch.randn(steps, 3, 7, dtype=dtype) * 3
        node = type("N", (), {"attrs": {"mean": True}})()
        ctx = type("C", (), {"integer": False})()
        assert torch.equal(time_sum(ctx, node, {}, x)[-1], x.mean(0))
        node.attrs = {"mean": False}
        out = time_sum(ctx, node, {}, x)
        assert torch.equal(out[-1], x.sum(0))
        assert torch.allclose(out[:-1], x.cumsum(0)[:-1])


@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_spikingjelly_multistep_readout_is_its_own_forward(reduce):
    model = sj_csnn(reduce).double().eval()
    graph = trace(model, X_IMG.shape[2:], input_kind="real")
    assert read_last(graph) == set(graph.outputs)
    out = run(graph, X_IMG).outputs(graph)[0]
    with torch.no_grad():
        ref = model(torch.from_numpy(X_IMG)).numpy()
    from spikingjelly.activation_based import functional
    functional.reset_net(model)  # SpikingJelly keeps the membrane after a forward
    assert out.shape == ref.shape == (2, 5)
    assert np.array_equal(out, ref)
    assert compare_with_torch(model, graph, X_IMG).equivalent


def test_checker_catches_a_wrong_reduction():
    """The same graph with the mean divided by T - 1 (planted through a kernel that does so) is not equivalent."""
    from spikec.ops import registry
    model = sj_csnn("mean").double().eval()
    graph = trace(model, X_IMG.shape[2:], input_kind="real")
    right = registry.OPS["time_sum"]
    wrong = dataclasses.replace(right, kernel=lambda ctx, n, p, x: torch.cumsum(x, 0) / (x.shape[0] - 1))
    registry.OPS["time_sum"] = wrong
    try:
        result = compare_with_torch(model, graph, X_IMG)
    finally:
        registry.OPS["time_sum"] = right
    assert not result.equivalent and result.real_mismatches > 0
    # and without the last-step mark the [T, B, N] run is not taken for the [B, N] output either
    unmarked = Graph(tuple(dataclasses.replace(n, attrs={k: v for k, v in n.attrs.items() if k != "read"})
                           for n in graph.nodes), graph.outputs, graph.meta)
    assert not compare_with_torch(model, unmarked, X_IMG).equivalent


def test_sj_mean_compiles_to_onnx_saves_and_verifies(tmp_path):
    c = spikec.compile(sj_csnn("mean"), X_IMG, targets=("onnx",))
    assert c.equivalent
    onnx_report = c.report["targets"]["onnx"]
    assert onnx_report["equivalent"] and "time_sum" in onnx_report["form_reason"]
    out = c.save(tmp_path / "out")
    io = np.load(out / "io.npz")
    assert io["output"].shape == (io["input"].shape[1], 5)  # [B, N]: the source output
    result = spikec.verify(out)
    assert result["target_onnx"]["equivalent"]
    assert result["ir_verifies"]["equivalent"]


def test_sj_mean_outdir_io_outputs_verify(tmp_path):
    c = spikec.compile(sj_csnn("mean"), X_IMG, targets=("onnx",))
    out = c.save(tmp_path / "out")
    assert spikec.verify(out)["io_outputs"]["equivalent"]
    # model.onnx says which outputs are running read-outs, and its last step is the source's [B, ...] output
    import onnx
    import onnxruntime as ort
    model = onnx.load(str(out / "model.onnx"))
    last = {p.key: p.value for p in model.metadata_props}["spikec.read_last"].split(",")
    assert last == c.report["targets"]["onnx"]["read_last"] == list(c.compiled.before.outputs)
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: X_IMG.astype(np.float64)})
    want = np.asarray(c.run(X_IMG))                        # the proven graph's output: the source's [B, ...]
    assert got.shape[1:] == want.shape and np.allclose(got[-1], want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_snntorch_loop_sum_compiles_exactly():
    torch.manual_seed(0)
    c = spikec.compile(SnnLoop("sum"), X_VEC, targets=("onnx",))
    assert c.equivalent, c.report["frontend"]["first_mismatches"]
    assert c.report["frontend"]["stepping"] == "loop"
    assert c.report["targets"]["onnx"]["equivalent"]
    graph = c.compiled.before
    assert read_last(graph) == set(graph.outputs)


def test_snntorch_loop_mean_of_its_spikes_compiles_exactly_in_float64():
    """snnTorch's neurons return float32 spikes whatever their input: in the float64 run their outputs take their
    input's dtype (stepping._spikes_in_input_dtype; no spike value changes), so the record's mean is a float64
    division as the proof's; the float32 source (its own float32 mean) is measured in source_precision."""
    torch.manual_seed(0)
    model = SnnLoop("mean")
    c = spikec.compile(model, X_VEC, targets=("onnx",))
    assert c.equivalent, c.report["frontend"]["first_mismatches"]
    assert c.report["targets"]["onnx"]["equivalent"]
    precision = c.report["source_precision"]
    assert precision["dtype"] == "float32" and "error" not in precision
    # without the cast the float64 run divides snnTorch's float32 spikes in float32: what the proof would miss
    from spikec.frontend.stepping import _spikes_in_input_dtype
    lif = next(m for m in model.modules() if type(m).__module__.startswith("snntorch"))
    spikes = lif(torch.ones(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
    assert spikes[0].dtype == torch.float32
    assert [o.dtype for o in _spikes_in_input_dtype(lif, (torch.ones(2, 3, dtype=torch.float64),), spikes)] == \
        [torch.float64, torch.float64]


def test_float32_attr_sums_and_divides_in_float32():
    from spikec.ops.temporal import time_sum
    x = (torch.rand(7, 3, 5, dtype=torch.float64) < 0.5).double()
    node = type("N", (), {"attrs": {"mean": True, "dtype": "float32"}})()
    out = time_sum(type("C", (), {"integer": False})(), node, {}, x)
    assert out.dtype == torch.float64 and torch.equal(out[-1], x.float().mean(0).double())


# NIR writes it (targets/nir/readout.py); Lava reads out spikes on the host (tests/targets/lava/test_readout_over_time.py)
@pytest.mark.parametrize("target, says", [("lava", "time_sum")])
def test_targets_without_a_form_refuse_by_name(target, says):
    c = spikec.compile(sj_csnn("current sum"), X_IMG, targets=(target,))
    r = c.report["targets"][target]
    assert r["refused"] and says in r["reason"] and "remedy" in r["reason"]


def test_step_stepping_refuses_with_remedy():
    class Rate(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x).mean(0)
    with pytest.raises(UnsupportedOp, match="stepping multistep") as e:
        spikec.compile(Rate(), X_VEC, stepping="step")
    assert "batch of one step" in str(e.value)
    with pytest.raises(UnsupportedOp, match="step_mode='m'"):  # SpikingJelly's own multi-step layers say why
        spikec.compile(sj_csnn("mean"), X_IMG, stepping="step")


def test_keepdim_over_time_is_refused():
    class Keep(nn.Module):
        def forward(self, x):
            return x.mean(0, keepdim=True)
    with pytest.raises(UnsupportedOp, match="keepdim"):
        trace(Keep(), (4,), input_kind="real")
