"""``placement.split`` without Lava: a synapse reading concat / slice / sum / mean / transpose chains becomes one
synapse per source, and the rewritten float graph computes the same values as the given one, bit for bit (dyadic
weights, binary spikes, reductions over powers of two: exact in any summation order), over every index layout:
a concat along an inner dim (interleaved columns), a strided slice, a sum with keepdim, a mean over two dims, a
transpose of a concat, a source read twice, convs over channel concats and channel slices. A conv reading a
spatial slice is left as it is (the mapping refuses it)."""
import numpy as np
import pytest

from spikec.core.builder import GraphBuilder
from spikec.core.interpreter import run
from spikec.targets.lava.placement import PLACEMENT, split

RNG = np.random.default_rng(11)


def weights(*shape):
    return RNG.integers(-8, 9, shape) / 16.0


def lif(b, name, x):
    c = b.shape(x)[0]
    return b.add(name, "lif", [x], {"reset": "zero"}, {"beta": np.full(c, 0.5), "alpha": np.ones(c),
                                                      "bias": np.zeros(c), "threshold": np.full(c, 0.3),
                                                      "v_reset": np.zeros(c)})


def conv(b, name, x, c_out):
    return b.add(name, "conv2d", [x], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
                 {"weight": weights(c_out, b.shape(x)[0], 3, 3), "bias": weights(c_out)})


def two_populations():
    b = GraphBuilder((2, 4, 4))
    s1 = lif(b, "s1", conv(b, "c1", "x", 2))
    s2 = lif(b, "s2", conv(b, "c2", "x", 3))
    return b, s1, s2


def linear_head(b, y):
    if len(b.shape(y)) > 1:
        y = b.add("flat", "flatten", [y], {"start": 0, "end": -1})
    return b.add("head", "linear", [y], {}, {"weight": weights(5, b.shape(y)[0]), "bias": weights(5)})


CASES = {
    "concat_inner_dim": lambda b, s1, s2: linear_head(b, b.add("cat", "concat", [s1, b.add(
        "part", "slice", [s2], {"dim": 0, "start": 0, "stop": 2, "step": 1})], {"axis": 1})),
    "strided_slice": lambda b, s1, s2: linear_head(b, b.add("part", "slice", [s2],
                                                            {"dim": 2, "start": 1, "stop": 4, "step": 2})),
    "sum_keepdim": lambda b, s1, s2: linear_head(b, b.add("total", "sum", [s2], {"dims": (1,), "keepdim": True})),
    "mean_two_dims": lambda b, s1, s2: linear_head(b, b.add("avg", "mean", [s2], {"dims": (1, 2), "keepdim": False})),
    "transposed_concat": lambda b, s1, s2: linear_head(b, b.add("tr", "transpose", [b.add(
        "cat", "concat", [s1, s2], {"axis": 0})], {"perm": (2, 0, 1)})),
    "source_read_twice": lambda b, s1, s2: linear_head(b, b.add("cat", "concat", [s1, s1], {"axis": 0})),
    "conv_channel_concat": lambda b, s1, s2: conv(b, "head", b.add("cat", "concat", [s2, s1], {"axis": 0}), 2),
    "conv_channel_slice": lambda b, s1, s2: conv(b, "head", b.add("part", "slice", [s2],
                                                                  {"dim": 0, "start": 0, "stop": 3, "step": 2}), 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_split_computes_the_same_values(case):
    b, s1, s2 = two_populations()
    head = CASES[case](b, s1, s2)
    g = b.graph(lif(b, "out", head), head)
    got, records = split(g)
    assert records and [r["nodes"] for r in records] == [["head"]]
    readers = {i for n in got.nodes if n.op in ("linear", "conv2d") for i in n.inputs}
    assert not any(got.node(i).op in PLACEMENT for i in readers)   # no synapse reads a placement now
    x = {"x": (np.random.default_rng(3).random((6, 2, 2, 4, 4)) < 0.5).astype(np.float64)}
    want, have = run(g, x), run(got, x)
    for pop in ("s1", "s2"):   # the sources fire and rest: the head's values depend on which neurons spiked
        assert np.asarray(want.values[pop]).any() and not np.asarray(want.values[pop]).all()
    assert len(np.unique(np.asarray(want.values[head]))) > 10
    for o in g.outputs:
        assert np.array_equal(np.asarray(want.values[o]), np.asarray(have.values[o])), o


def test_a_conv_reading_a_spatial_slice_is_left_as_it_is():
    b, s1, s2 = two_populations()
    head = conv(b, "head", b.add("part", "slice", [s2], {"dim": 1, "start": 1, "stop": 3, "step": 1}), 2)
    g = b.graph(lif(b, "out", head))
    got, records = split(g)
    assert records == [] and got is g
