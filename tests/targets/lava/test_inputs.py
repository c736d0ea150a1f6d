"""One reader of run inputs (``spikec.core.interpreter.as_inputs``): the interpreter and the Lava target's
integer inputs accept and refuse the same inputs with the same words; Lava then adds its own value checks."""
import numpy as np
import pytest

from spikec.core.builder import GraphBuilder
from spikec.ir.errors import BadInput
from spikec.core.interpreter import as_inputs, run
from spikec.targets.lava.limits import int_inputs


def _graph(two=False):
    b = GraphBuilder((3,))
    lif = {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0}
    y = b.add("fc", "linear", ["x"], {}, {"weight": np.ones((2, 3))})
    if two:
        b.nodes.append(b.nodes[0].with_(name="x2"))
        b.types["x2"] = b.types["x"]
        y = b.add("sum", "add", [y, b.add("fc2", "linear", ["x2"], {}, {"weight": np.ones((2, 3))})])
    return b.graph(b.add("out", "lif", [y], {"reset": "subtract"}, lif))


@pytest.mark.parametrize("bad,words", [
    (np.ones((4, 2, 5)), "input 'x' expects [T, B, 3], got shape (4, 2, 5)"),
    (np.ones((4, 3)), "input 'x' expects [T, B, 3], got shape (4, 3)"),
    (np.ones((0, 2, 3)), "input 'x' has T=0, B=2; both must be >= 1"),
    ({"y": np.ones((4, 2, 3))}, "input 'x' expects [T, B, 3], got nothing"),
])
def test_interpreter_and_lava_refuse_the_same_inputs_alike(bad, words):
    g = _graph()
    messages = []
    for read in (lambda: run(g, bad), lambda: int_inputs(g, bad), lambda: as_inputs(g, bad)):
        with pytest.raises(BadInput) as e:
            read()
        messages.append(str(e.value))
    assert words in messages[0] and len(set(messages)) == 1


def test_an_array_for_a_graph_of_two_inputs_is_refused_by_both():
    g = _graph(two=True)
    for read in (lambda: run(g, np.ones((2, 1, 3))), lambda: int_inputs(g, np.ones((2, 1, 3)))):
        with pytest.raises(BadInput, match="the graph has 2 inputs"):
            read()


def test_good_inputs_read_alike_then_lava_makes_them_int64():
    g = _graph(two=True)
    x = {"x": np.ones((2, 1, 3)), "x2": np.zeros((2, 1, 3))}
    assert as_inputs(g, x) is x
    got = int_inputs(g, x)
    assert set(got) == {"x", "x2"} and all(v.dtype == np.int64 for v in got.values())
    one = int_inputs(_graph(), np.ones((2, 1, 3)))
    assert list(one) == ["x"] and one["x"].shape == (2, 1, 3)
    with pytest.raises(BadInput, match="not integral"):   # Lava's own check, after the shared one
        int_inputs(_graph(), np.full((2, 1, 3), 0.5))
