"""Calls with no converter captured to core ATen and lowered through one table (spikec/frontend/aten): each ATen
op's lowering reproduces torch's float64 forward bit for bit in spikec's interpreter, and the exported ONNX model
reproduces the interpreter in onnxruntime; what would touch T or B, or has no lowering, is refused naming the op,
the user's line and a remedy."""
import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import trace
from spikec.frontend.aten import LOWERINGS
from spikec.targets.onnx import check_model_against, export

RNG = np.random.default_rng(0)
X4 = RNG.normal(size=(3, 2, 4, 6))            # [T, B, N, D]
XC = RNG.normal(size=(3, 2, 2, 6, 6))         # [T, B, C, H, W]


class Fn(nn.Module):
    def __init__(self, fn, *modules):
        super().__init__()
        self.fn, self.layers = fn, nn.ModuleList(modules)

    def forward(self, x):
        return self.fn(x, *self.layers)


def merged(module):
    """``module`` applied per step: T and B merged for it, as users write a per-step torch layer."""
    return lambda x, m: m(x.flatten(0, 1)).unflatten(0, (x.shape[0], x.shape[1]))


def check(model, x, *, onnx_run=True):
    """Traced graph run by the interpreter == torch's float64 forward, bit for bit; then the ONNX export run in
    onnxruntime against the interpreter (spikes exact, reals to the target's bound)."""
    model = model.double().eval()
    graph = trace(model, x.shape[2:], input_kind="real")
    got = run(graph, x)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    out = got.outputs(graph)[0]
    assert out.shape == ref.shape and np.array_equal(out, ref), np.abs(out - ref).max()
    if onnx_run:
        m = export(graph, x.shape[0])
        onnx.checker.check_model(m, full_check=True)
        result = check_model_against(m, graph, x, got)
        assert result["equivalent"], result["first_mismatches"]
    return graph


def ops(graph):
    return [n.op for n in graph.nodes if n.op != "input"]


CASES = {
    "cat": (lambda x: torch.cat([x, x * 0.5], dim=2), X4, ["scale", "concat"]),
    "cat-last-negative": (lambda x: torch.cat((x, x, x), -1), X4, ["concat", "concat"]),
    "stack": (lambda x: torch.stack([x, x], dim=2).flatten(2, 3), X4, ["concat", "reshape", "flatten"]),
    "chunk": (lambda x: x.chunk(2, dim=-1)[1], X4, ["slice"]),
    "split": (lambda x: torch.split(x, [1, 3], dim=2)[1], X4, ["slice"]),
    "getitem-slice": (lambda x: x[:, :, 1:4:2], X4, ["slice"]),
    "getitem-select": (lambda x: x[:, :, 1], X4, ["slice", "reshape"]),
    "narrow": (lambda x: x.narrow(3, 2, 3), X4, ["slice"]),
    "sum": (lambda x: x.sum(2), X4, ["sum"]),
    "sum-keepdim": (lambda x: x.sum((-1, 2), keepdim=True), X4, ["sum"]),
    "mean": (lambda x: x.mean(-1), X4, ["mean"]),
    "mean-keepdim": (lambda x: torch.mean(x, dim=(2, 3), keepdim=True), X4, ["mean"]),
    "contiguous-clone-detach": (lambda x: x.transpose(2, 3).contiguous().clone().detach(), X4, ["transpose"]),
    "sub": (lambda x: x - x * 0.25, X4, ["scale", "scale", "add"]),
    "sub-scalar": (lambda x: x.sub(1.5), X4, ["scale"]),
    "div-scalar": (lambda x: x / 3.0, X4, ["div"]),
    "unsqueeze-squeeze": (lambda x: x.unsqueeze(2).squeeze(2), X4, ["reshape", "reshape"]),
    "flatten-dims": (lambda x: x.flatten(2).unflatten(2, (4, 6)), X4, ["flatten", "reshape"]),
    "relu-function": (lambda x: torch.nn.functional.relu(x), X4, ["relu"]),
    "neg": (lambda x: -x, X4, ["scale"]),
    "amax": (lambda x: x.amax(2), X4, ["amax"]),
    "max-dim": (lambda x: x.max(dim=-1, keepdim=True).values, X4, ["amax"]),
    "clamp": (lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0.0), X4, ["clamp", "clamp", "add"]),
    "sigmoid-tanh": (lambda x: torch.sigmoid(x) * torch.tanh(x), X4, ["sigmoid", "tanh", "mul"]),
    "einsum": (lambda x: torch.einsum("tbnd,tbmd->tbnm", x, x)[:, :, 0], X4, None),
    "to-own-dtype": (lambda x: x.to(torch.float64) + x.type_as(x), X4, ["add"]),
}


@pytest.mark.parametrize("case", CASES)
def test_function_lowering_is_exact(case):
    fn, x, expected = CASES[case]
    graph = check(Fn(lambda x: fn(x)), x)
    assert expected is None or ops(graph) == expected


MODULES = {
    "conv1d": (nn.Conv1d(4, 3, 3, padding=1, stride=2), ["reshape", "conv2d", "reshape"]),
    "conv1d-dilated-grouped": (nn.Conv1d(4, 4, 3, dilation=2, groups=2, bias=False), ["reshape", "conv2d", "reshape"]),
    "avgpool1d": (nn.AvgPool1d(2), ["reshape", "avgpool2d", "reshape"]),
    "maxpool1d": (nn.MaxPool1d(3, stride=1, padding=1), ["reshape", "maxpool2d", "reshape"]),
    "adaptive-avgpool1d": (nn.AdaptiveAvgPool1d(1), ["reshape", "mean", "reshape"]),
    "relu-inplace": (nn.ReLU(inplace=True), ["relu"]),
}


@pytest.mark.parametrize("case", MODULES)
def test_module_lowering_is_exact(case):
    module, expected = MODULES[case]
    assert ops(check(Fn(merged(module), module), X4)) == expected


def test_time_distributed_modules_and_functional_pools():
    model = nn.Sequential(snn.TimeDistributed(nn.Conv2d(2, 2, 3, padding=1), nn.AvgPool2d(2)),
                          Fn(lambda x: F.adaptive_avg_pool2d(x.flatten(0, 1), 1).unflatten(0, (x.shape[0], -1))))
    assert ops(check(model, XC)) == ["conv2d", "avgpool2d", "mean"]  # ATen: adaptive pooling to 1 is a mean


def test_modules_without_converters_inside_time_distributed():
    """TimeDistributed's converter calls its children: one with no converter (Conv1d, AvgPool1d) is captured too."""
    model = snn.TimeDistributed(nn.Conv1d(4, 3, 3, padding=1), nn.AvgPool1d(2), nn.ReLU())
    graph = check(model, X4)
    assert ops(graph) == ["reshape", "conv2d", "reshape", "reshape", "avgpool2d", "reshape", "relu"]
    assert dict(graph.meta["converters"])["model.0"] == "[conv2d, reshape] torch.nn.modules.conv.Conv1d -> core ATen"


def test_parameters_read_in_forward_are_constants():
    lin = nn.Linear(6, 5)
    graph = check(Fn(lambda x, m: F.linear(x.flatten(0, 1), m.weight, m.bias).unflatten(0, (x.shape[0], -1)), lin), X4[:, :, 0])
    assert ops(graph) == ["linear"]


def test_float32_parameters_read_in_forward():
    """A float32 model (as users train it): the capture's examples take the parameters' dtype."""
    lin = nn.Linear(6, 5)
    model = Fn(lambda x, m: F.linear(x.flatten(0, 1), m.weight).unflatten(0, (x.shape[0], -1)), lin)
    graph = trace(model, (6,), input_kind="real")
    assert ops(graph) == ["linear"] and graph.nodes[1].params["weight"].dtype == np.float64


def test_batch_norm_function_in_eval():
    bn = nn.BatchNorm1d(4).eval()
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    graph = check(Fn(lambda x, m: F.batch_norm(x.flatten(0, 1), m.running_mean, m.running_var, m.weight, m.bias)
                     .unflatten(0, (x.shape[0], x.shape[1])), bn), X4)
    assert ops(graph) == ["batchnorm"]


def test_step_convention_sees_the_batch_only():
    """A per-step forward (stepping "step"): the ATen capture sees [B, ...] and keeps B as the lead dim."""
    from spikec.frontend.stepping import Stepped
    conv = nn.Conv1d(4, 2, 3).double()
    graph = trace(Stepped(Fn(lambda x, m: torch.cat([m(x), m(x)], 1).mean(-1, keepdim=True), conv)), (4, 6))
    assert ops(graph) == ["reshape", "conv2d", "reshape"] * 2 + ["concat", "mean"]
    x = RNG.normal(size=(3, 2, 4, 6))
    with torch.no_grad():
        ref = np.stack([torch.cat([conv(s), conv(s)], 1).mean(-1, keepdim=True).numpy() for s in torch.from_numpy(x)])
    assert np.array_equal(run(graph, x).outputs(graph)[0], ref)


# -- refusals --------------------------------------------------------------------------------------------------
def refusal(fn, x=X4, *modules) -> UnsupportedOp:
    with pytest.raises(UnsupportedOp) as e:
        trace(Fn(fn, *modules).double(), x.shape[2:], input_kind="real")
    return e.value


def refused(fn, x=X4, *modules) -> str:
    """The refusal's message and remedy, without ``where`` (which quotes the user's line, these words included)."""
    e = refusal(fn, x, *modules)
    return f"{e.what} | {e.remedy}"


def test_unlowered_op_names_the_aten_op_and_the_users_line():
    e = refusal(lambda x: torch.atan(x) * 2.0)
    assert "aten.atan" in e.what and "function torch.atan" in e.what and "no IR lowering" in e.what
    assert "test_aten.py:" in e.where and "torch.atan(x) * 2.0" in e.where, e.where  # the user's line
    assert "register_function" in e.remedy


def test_time_and_batch_are_refused():
    assert "aten.cat: works along dim 0, the time dim T" in refused(lambda x: torch.cat([x, x], dim=0))
    assert "reduce it over time outside the model" in refused(lambda x: x.sum((0, 1)))  # over T and B at once
    assert "dim 1, the batch dim B" in refused(lambda x: x.mean(1))
    assert "mixing the leading [T, B]" in refused(lambda x: x.unsqueeze(0))
    assert "must keep the leading" in refused(lambda x: x.reshape(6, 4, 6))
    assert "every dim" in refused(lambda x: x.sum())


def test_per_step_module_on_the_sequence_is_refused():
    e = refusal(lambda x: F.avg_pool2d(x, 2))  # torch would pool [T, B, N, D] as B channels of T samples
    assert "fx node 'avg_pool2d'" in e.where, e.where
    assert "average pooling on a [T, B, ...] tensor" in e.what and "flatten(0, 1)" in e.remedy, e.what
    e = refusal(lambda x, m: m(x), X4, nn.Conv1d(4, 2, 1))  # torch itself refuses a 4-d input
    assert "module 'layers.0'" in e.where and "could not be captured" in e.what and "T=3, B=5" in e.what, e.what


def test_runtime_sizes_passed_to_a_captured_call_are_refused():
    assert "runtime size T" in refused(lambda x: torch.split(x, x.shape[0], dim=3)[0])


def test_a_cast_is_refused():
    assert "casts to torch.float32" in refused(lambda x: x.float())


def test_broadcasting_and_indices_are_refused():
    assert "could not be captured" in refused(lambda x: x * x[..., 0])  # ranks differ: torch aligns T with B
    assert "field 'indices'" in refused(lambda x: x.max(dim=2).indices.float())
    assert "indices" in refused(lambda x: F.max_pool1d(x.flatten(0, 1), 2, return_indices=True)[1].float().view(
        3, 2, 4, 3))


def test_the_table_holds_the_ops_the_issue_lists():
    names = {op.name().split("::")[1] for op in LOWERINGS}
    for name in ("view", "permute", "cat", "slice.Tensor", "select.int", "sum.dim_IntList", "mean.dim", "convolution",
                 "avg_pool2d", "max_pool2d_with_indices", "_adaptive_avg_pool2d", "addmm", "bmm"):
        assert any(n == name or n.startswith(name.split(".")[0]) for n in names), name


def test_a_repeated_call_is_captured_once(monkeypatch):
    """A block repeated N times traces each distinct function call once (same target, arguments and shapes);
    module calls are captured each time (their weights are constants of the graph)."""
    import importlib
    cap = importlib.import_module("spikec.frontend.aten.capture")
    calls = []
    real = cap.make_fx
    monkeypatch.setattr(cap, "make_fx", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(cap, "_CACHE", {})
    conv = nn.Conv1d(4, 4, 1)
    graph = check(Fn(lambda x, m: merged(m)(torch.cat([x[..., :3], x[..., 3:]], 3).mean(-1, keepdim=True) +
                                            torch.cat([x[..., :3], x[..., 3:]], 3).mean(-1, keepdim=True), m) +
                     merged(m)(x.mean(-1, keepdim=True), m), conv), X4, onnx_run=False)
    assert ops(graph).count("concat") == 2 and ops(graph).count("conv2d") == 2
    assert len(calls) == 2 + 1 + 1 + 2  # the two slices, cat, mean (x's mean has the cat's shape: cached), 2 convs
