"""Parameter schemas: every op's parameters are typed ``Param`` records (name, layout, meaning, required); ops
defined the old way (names only) get an ``unspecified`` schema; the verifier checks nodes against the schema."""
import numpy as np
import pytest

import spikec.frontend  # noqa: F401  (the converters' ops)
import spikec.targets.lava.ops  # noqa: F401  (the Lava target's integer ops)
import spikec.codings.ttfs  # noqa: F401  (the TTFS coding's ops)
from spikec.ir.errors import IRError
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import problems, verify
from spikec.ops import OPS, PER_CHANNEL, UNSPECIFIED, OpDef, Param, define, opdef

CORE = ("spikec.ops.",)


@pytest.fixture
def scratch_op():
    """Define ops for one test and remove them after (the registry is global)."""
    names = []

    def make(name, *args, **kw):
        names.append(name)
        return define(name, *args, **kw)
    yield make
    for n in names:
        OPS.pop(n, None)


def test_every_op_has_a_consistent_schema():
    for name, d in OPS.items():
        assert all(isinstance(p, Param) for p in d.params), name
        assert d.required == tuple(p.name for p in d.params if p.required), name
        assert d.optional == tuple(p.name for p in d.params if not p.required), name
        assert len(set(d.param_names)) == len(d.params), name
        assert d.module, name


def test_core_ops_document_every_layout_and_what_they_compute():
    core = {n: d for n, d in OPS.items() if d.module.startswith(CORE)}
    assert {"conv2d", "linear", "lif", "silif", "csilif", "bntt"} <= set(core)
    for name, d in core.items():
        assert d.doc, name
        for p in d.params:
            assert p.layout != UNSPECIFIED and p.doc, (name, p.name)


def test_documented_layouts():
    assert opdef("conv2d").param("weight").layout == "(C_out, C_in/groups, kH, kW)"
    assert opdef("linear").param("weight").layout == "(N_out, N_in)"
    for op in ("lif", "intfire", "silif", "csilif", "intfire_unrolled"):
        assert opdef(op).param("threshold").layout == PER_CHANNEL, op
    assert opdef("bntt").param("gamma").layout == "(T, C)"
    assert opdef("intfire").param("bias").required is False


def test_the_threshold_is_called_threshold_in_every_firing_op():
    for op in ("lif", "intfire", "intfire_unrolled", "silif", "csilif", "ttfs_fire", "lif_snntorch", "lif_sj"):
        assert "threshold" in opdef(op).param_names, op
    for name, d in OPS.items():
        assert not {"v_th", "theta"} & set(d.param_names), name


@pytest.mark.parametrize("layout,ranks", [("()", {0}), ("(C,)", {1}), (PER_CHANNEL, {0, 1}),
                                          ("(C_out, C_in/groups, kH, kW)", {4}), ("(T, C)", {2}),
                                          (UNSPECIFIED, None), ("(*shape)", None), ("per channel", None)])
def test_layout_ranks(layout, ranks):
    assert Param("p", layout).ranks == (None if ranks is None else frozenset(ranks))


def test_a_legacy_definition_gets_an_unspecified_schema(scratch_op):
    """What the converters do: define(name, arity, infer, required, optional, count=..., kernel=..., flags)."""
    d = scratch_op("legacy_test_op", 1, lambda n, i: i[0], ("beta", "threshold"), ("bias",),
                   count=lambda n: 0, kernel=lambda ctx, n, p, x: x, stateful=True, neuron=True)
    assert d.params == (Param("beta"), Param("threshold"), Param("bias", required=False))
    assert all(p.layout == UNSPECIFIED and p.ranks is None for p in d.params)
    assert (d.required, d.optional, d.stateful, d.neuron) == (("beta", "threshold"), ("bias",), True, True)
    assert d.module == __name__
    x = Node("x", "input", (), TensorType((3,), "binary"))
    ok = Node("n", "legacy_test_op", ("x",), TensorType((3,), "binary"), {}, {"beta": np.ones((2, 2)), "threshold": 1.0})
    assert problems(Graph((x, ok), ("n",))) == []


def test_a_schema_and_disagreeing_names_are_refused(scratch_op):
    with pytest.raises(IRError, match="disagree"):
        scratch_op("bad_test_op", 1, lambda n, i: i[0], ("weight",), params=(Param("weight", "(N,)"),
                                                                               Param("bias", "(N,)")))
    with pytest.raises(IRError, match="repeat"):
        OpDef("dup_test_op", 1, (), (), lambda n, i: i[0], lambda n: 0, params=(Param("a"), Param("a")))


def test_a_schema_with_matching_names_is_accepted(scratch_op):
    d = scratch_op("both_test_op", 1, lambda n, i: i[0], ("w",), ("b",),
                   params=(Param("w", "(N,)", "weights"), Param("b", "(N,)", "bias", required=False)))
    assert d.param("w").doc == "weights" and d.optional == ("b",)


def _lif_node(**params):
    p = {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0, **params}
    return Node("n", "lif", ("x",), TensorType((3,), "binary"), {"reset": "subtract"}, p)


def test_an_unknown_parameter_is_refused_with_the_known_names():
    g = Graph((Node("x", "input", (), TensorType((3,))), _lif_node(v_th=np.ones(3))), ("n",))
    with pytest.raises(IRError) as e:
        verify(g)
    assert "unexpected parameter 'v_th' (lif takes beta, alpha, bias, threshold, v_reset)" in e.value.what
    assert "lif takes beta, alpha, bias, threshold, v_reset" in e.value.remedy


def test_a_parameter_of_the_wrong_rank_is_refused_with_its_layout():
    g = Graph((Node("x", "input", (), TensorType((3,))), _lif_node(threshold=np.ones((3, 1)))), ("n",))
    (msg,) = problems(g)
    assert msg == "node 'n': parameter 'threshold' has shape (3, 1); lif lays it out as () or (C,)"
    conv = Node("c", "conv2d", ("x",), TensorType((2, 2, 2)), {"stride": (1, 1), "padding": (0, 0),
                                                                "dilation": (1, 1), "groups": 1},
                {"weight": np.ones((2, 3))})
    (msg,) = problems(Graph((Node("x", "input", (), TensorType((3, 2, 2))), conv), ("c",)))
    assert "lays it out as (C_out, C_in/groups, kH, kW)" in msg


def test_a_well_formed_graph_has_no_remedy_to_give():
    g = Graph((Node("x", "input", (), TensorType((3,))), _lif_node()), ("n",))
    assert verify(g) is g
