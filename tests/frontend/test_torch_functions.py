"""Frontend conversions used by attention blocks (spikec/frontend/torch_functions.py, "shapes, reshapes and
attention products"): ``x.shape`` / ``x.size()``, reshape / view keeping ``x.shape[0], x.shape[1]``, permute,
transpose, ``@`` / ``torch.matmul``, softmax, tril. Traced graphs reproduce torch's float64 outputs bit for bit;
what would mix time or batch is refused, naming the fx node; products of spike tensors carry integer kinds."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import trace


class Fn(nn.Module):
    """A model whose forward is ``fn(x)``: torch.fx traces the function's tensor calls."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def torch_out(model, x):
    with torch.no_grad():
        return model.double()(torch.tensor(x, dtype=torch.float64)).numpy()


def assert_exact(model, shape, x, kind="real"):
    graph = trace(model, shape, input_kind=kind)
    got = run(graph, x).outputs(graph)[0]
    ref = torch_out(model, x)
    assert got.shape == ref.shape
    assert np.array_equal(got, ref), np.abs(got - ref).max()
    return graph


def ops(graph):
    return [n.op for n in graph.nodes]


RNG = np.random.default_rng(0)
X5 = RNG.normal(size=(3, 2, 4, 2, 3))        # [T, B, C, H, W]
X4 = RNG.normal(size=(3, 2, 5, 6))           # [T, B, N, D]


def heads(x, h=2, c=4, n=6):
    """``[T, B, C, H, W] -> [T, B, h, N, C/h]``, as the SDT example writes it (static per-step sizes)."""
    return x.reshape(x.shape[0], x.shape[1], h, c // h, n).transpose(-1, -2)


# -- exact conversions ------------------------------------------------------------------------------
CASES = {
    "reshape-shape-getattr": (lambda x: x.reshape(x.shape[0], x.shape[1], 2, 12), (4, 2, 3), X5),
    "view-size-method": (lambda x: x.view(x.size(0), x.size()[1], 8, 3), (4, 2, 3), X5),
    "reshape-minus-one": (lambda x: x.reshape(x.shape[0], x.shape[1], -1, 6), (4, 2, 3), X5),
    "reshape-static-dims": (lambda x: x.reshape(x.shape[0], x.shape[1], x.shape[2], x.shape[-1], x.shape[3]),
                            (4, 2, 3), X5),
    "permute": (lambda x: x.permute(0, 1, 3, 4, 2), (4, 2, 3), X5),
    "permute-list-negative": (lambda x: x.permute([0, 1, -1, -3, -2]), (4, 2, 3), X5),
    "torch.permute": (lambda x: torch.permute(x, (0, 1, 4, 2, 3)), (4, 2, 3), X5),
    "transpose-last-two": (lambda x: x.transpose(-1, -2), (5, 6), X4),
    "torch.transpose": (lambda x: torch.transpose(x, 2, 3), (5, 6), X4),
    "matmul-operator": (lambda x: x @ x.transpose(-2, -1), (5, 6), X4),
    "torch.matmul": (lambda x: torch.matmul(x.transpose(-2, -1), x), (5, 6), X4),
    "softmax-method": (lambda x: x.softmax(-1), (5, 6), X4),
    "F.softmax": (lambda x: F.softmax(x, dim=2), (5, 6), X4),
    "torch.softmax": (lambda x: torch.softmax(x @ x.transpose(-1, -2), dim=-1), (5, 6), X4),
    "tril": (lambda x: torch.tril(x @ x.transpose(-1, -2)), (5, 6), X4),
    "tril-method": (lambda x: (x @ x.transpose(-1, -2)).tril(), (5, 6), X4),
    "attention-heads": (lambda x: ((heads(x) @ heads(x).transpose(-2, -1)) @ heads(x)) * 0.5, (4, 2, 3), X5),
    "attention-round-trip": (lambda x: (heads(x) @ (heads(x).transpose(-2, -1) @ heads(x))).transpose(-1, -2)
                             .reshape(x.shape[0], x.shape[1], 4, 2, 3), (4, 2, 3), X5),
}


@pytest.mark.parametrize("case", list(CASES))
def test_conversion_is_exact(case):
    fn, shape, x = CASES[case]
    assert_exact(Fn(fn), shape, x)


def test_ops_emitted_for_the_sdt_attention_shape_code():
    fn, shape, x = CASES["attention-round-trip"]
    graph = assert_exact(Fn(fn), shape, x)
    assert set(ops(graph)) == {"input", "reshape", "transpose", "matmul"}
    assert ops(graph).count("matmul") == 2
    assert graph.node(graph.outputs[0]).type.shape == (4, 2, 3)


def test_shapes_are_read_at_trace_time_and_work_for_any_t_and_b():
    fn, shape, _ = CASES["attention-heads"]
    model = Fn(fn)
    graph = trace(model, shape, input_kind="real")
    for t, b in ((1, 1), (5, 3)):
        x = RNG.normal(size=(t, b, *shape))
        assert np.array_equal(run(graph, x).outputs(graph)[0], torch_out(model, x))


# -- refusals -----------------------------------------------------------------------------------------
REFUSALS = {
    "reshape-minus-one-not-a-step": (lambda x: x.reshape(-1, 12), "reshape", "leading [T, B]"),
    "reshape-merges-B": (lambda x: x.reshape(x.shape[0], -1), "reshape", "leading [T, B]"),
    "view-swaps-T-and-B": (lambda x: x.view(x.shape[1], x.shape[0], 24), "view", "leading [T, B]"),
    "reshape-T-plus-B": (lambda x: x.reshape(x.shape[0] + x.shape[1], 24), "add", "T or B"),
    "permute-moves-dim0": (lambda x: x.permute(1, 0, 2, 3, 4), "permute", "[T, B]"),
    "permute-moves-dim1": (lambda x: x.permute(0, 2, 1, 3, 4), "permute", "[T, B]"),
    "transpose-dim0": (lambda x: x.transpose(0, 2), "transpose", "[T, B]"),
    "softmax-dim0": (lambda x: x.softmax(0), "softmax", "dim 0"),
    "softmax-dim1": (lambda x: F.softmax(x, dim=1), "softmax", "dim 1"),
    "softmax-no-dim": (lambda x: x.softmax(), "softmax", "missing 1 required positional arguments: \"dim\""),
    "tril-offset-diagonal": (lambda x: x.tril(1), "tril", "diagonal"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusal_names_the_fx_node(case):
    fn, node, words = REFUSALS[case]
    with pytest.raises(UnsupportedOp) as info:
        trace(Fn(fn), (4, 2, 3))
    msg = str(info.value)
    assert f"fx node '{node}'" in info.value.where, msg
    assert words in info.value.what, msg  # not just in the quoted line of the user's code


def test_refusal_inside_a_module_names_the_node_in_its_scope():
    class Attn(nn.Module):
        def forward(self, x):
            return x.reshape(-1, 12)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attn()

        def forward(self, x):
            return self.attn(x)

    with pytest.raises(UnsupportedOp) as info:
        trace(Net(), (4, 2, 3))
    assert "fx node 'attn.reshape'" in str(info.value)


def test_matmul_with_a_constant_left_operand_is_refused():
    """x @ W is a linear layer (tests/frontend/test_aten_ops_more.py); W @ x mixes the per-step rows: refused."""
    with pytest.raises(UnsupportedOp, match="multiplies a constant by an activation"):
        trace(Fn(lambda x: torch.ones(5, 5) @ x), (5, 6))


def test_tril_of_a_one_dimensional_per_step_tensor_is_refused():
    model = Fn(lambda x: torch.tril(x))
    x = np.ones((1, 3, 4))
    # what torch computes: the three samples are identical, their outputs are not
    ref = torch_out(model, x)
    assert not np.array_equal(ref[0, 0], ref[0, 2])
    with pytest.raises(BadInput):
        trace(model, (4,))


def test_transpose_with_keyword_dims_converts():
    assert_exact(Fn(lambda x: x.transpose(dim0=-1, dim1=-2)), (5, 6), X4)


def test_reshape_with_t_as_a_per_step_dim_is_refused_naming_the_node():
    with pytest.raises(UnsupportedOp) as info:
        trace(Fn(lambda x: x.reshape(x.shape[0], x.shape[1], x.shape[0], 8)), (4, 2, 3))
    assert "fx node 'reshape'" in str(info.value)


@pytest.mark.parametrize("fn", [lambda x: x.reshape(x.shape[0], x.shape[1], x.shape[2], x.shape[3] * x.shape[4]),
                                lambda x: x.reshape(x.shape[0], x.shape[1], 2, x.shape[2] // 2, 6)],
                         ids=["mul", "floordiv"])
def test_arithmetic_on_static_shape_entries_converts(fn):
    assert_exact(Fn(fn), (4, 2, 3), X5)


@pytest.mark.parametrize("fn", [lambda x: torch.reshape(x, (x.shape[0], x.shape[1], -1, 6)),
                                lambda x: x.reshape((x.shape[0], x.shape[1], 24))], ids=["torch.reshape", "tuple"])
def test_reshape_with_a_shape_tuple_converts(fn):
    assert_exact(Fn(fn), (4, 2, 3), X5)


# -- value kinds --------------------------------------------------------------------------------------
def spikes(shape, p=0.5, seed=1):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.float64)


def test_binary_times_binary_is_integer_with_the_inner_dim_as_ceiling():
    # per step (N=5, D=6): Q K^T has inner dim 6, K^T V inner dim 5
    graph = assert_exact(Fn(lambda x: x @ x.transpose(-1, -2)), (5, 6), spikes((3, 2, 5, 6)), kind="binary")
    t = graph.node(graph.outputs[0]).type
    assert (t.kind, t.ceiling, t.shape) == ("integer", 6, (5, 5))
    graph = assert_exact(Fn(lambda x: x.transpose(-1, -2) @ x), (5, 6), spikes((3, 2, 5, 6)), kind="binary")
    t = graph.node(graph.outputs[0]).type
    assert (t.kind, t.ceiling, t.shape) == ("integer", 5, (6, 6))


def test_kinds_through_reshape_transpose_products_softmax_and_tril():
    x = spikes((2, 3, 4, 2, 3))

    def fn(x):
        h = heads(x)                                  # binary [2, 6, 2]
        s = h @ h.transpose(-2, -1)                   # integer <= 2, [2, 6, 6]
        return torch.tril(s) @ h                      # integer <= 6 * 2 * 1 = 12, [2, 6, 2]

    graph = assert_exact(Fn(fn), (4, 2, 3), x, kind="binary")
    kinds = {n.op: n.type for n in graph.nodes}
    assert kinds["reshape"].kind == kinds["transpose"].kind == "binary"
    assert kinds["causal_mask"].kind == "integer" and kinds["causal_mask"].ceiling == 2
    out = graph.node(graph.outputs[0]).type
    assert (out.kind, out.ceiling, out.shape) == ("integer", 12, (2, 6, 2))
    soft = trace(Fn(lambda x: (heads(x) @ heads(x).transpose(-2, -1)).softmax(-1)), (4, 2, 3), input_kind="binary")
    assert soft.node(soft.outputs[0]).type.kind == "real"


def test_spike_times_real_is_real():
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.spike = snn.LIF(beta=0.0, threshold=0.0)

        def forward(self, x):
            return self.spike(x) @ x.transpose(-1, -2)

    graph = assert_exact(Mixed(), (5, 6), X4)
    assert graph.node(graph.outputs[0]).type.kind == "real"
    assert graph.node("spike").type.kind == "binary"


# -- T and B merged for per-step torch modules, as users write it ------------------------------------
MERGES = {
    "flatten-0-1": lambda conv, x: conv(x.flatten(0, 1)).unflatten(0, (x.shape[0], x.shape[1])),
    "reshape-T-times-B": lambda conv, x: conv(x.reshape(x.shape[0] * x.shape[1], 4, 2, 3)).reshape(
        x.shape[0], x.shape[1], 3, 2, 3),
    "view-minus-one": lambda conv, x: conv(x.view(-1, 4, 2, 3)).view(x.shape[0], x.shape[1], -1),
    "torch-flatten-unflatten": lambda conv, x: torch.unflatten(conv(torch.flatten(x, 0, 1)).relu() + 1.0, 0,
                                                               (x.shape[0], -1)),
}


@pytest.mark.parametrize("case", list(MERGES))
def test_time_batch_merge_idioms_are_exact(case):
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 3, 3, padding=1)

        def forward(self, x):
            return MERGES[case](self.conv, x)

    graph = assert_exact(Net(), (4, 2, 3), X5)
    assert "conv2d" in ops(graph)


class With(nn.Module):
    """``fn(module, x)`` with ``module`` registered as a submodule (fx needs it installed)."""

    def __init__(self, module, fn):
        super().__init__()
        self.m, self.fn = module, fn

    def forward(self, x):
        return self.fn(self.m, x)


def test_a_neuron_on_merged_time_and_batch_is_refused():
    with pytest.raises(UnsupportedOp, match="would see T\\*B as time|T\\*B"):
        trace(With(snn.LIF(beta=0.5), lambda lif, x: lif(x.flatten(0, 1))), (4, 2, 3))


def test_returning_merged_time_and_batch_is_refused_with_the_remedy():
    with pytest.raises(BadInput, match="unflatten"):
        trace(With(nn.Conv2d(4, 4, 1), lambda conv, x: conv(x.flatten(0, 1))), (4, 2, 3))


def test_a_per_step_module_on_unmerged_input_is_still_refused():
    with pytest.raises(UnsupportedOp, match="TimeDistributed"):
        trace(With(nn.Conv2d(4, 4, 1), lambda conv, x: conv(x.flatten(0, 1).unflatten(0, (x.shape[0], x.shape[1])))),
              (4, 2, 3))


def test_functional_pooling_on_merged_time_and_batch_is_exact():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 3, 3, padding=1)

        def forward(self, x):
            y = F.max_pool2d(F.avg_pool2d(self.conv(x.flatten(0, 1)), 2, ceil_mode=True), kernel_size=1)
            return y.unflatten(0, (x.shape[0], x.shape[1]))

    torch.manual_seed(0)
    graph = assert_exact(Net(), (4, 2, 3), X5)
    assert ops(graph) == ["input", "conv2d", "avgpool2d", "maxpool2d"]
