"""ONNX checks driven with the input that triggers them: the streaming model's step limit when two per-step
tables differ in length (the shorter one bounds the stream)."""
import numpy as np
import pytest

from spikec.ir.graph import TensorType
from spikec.targets.onnx.streaming import export_step, max_steps, run_stream, session, step_feeds
from test_onnx_ops import LIF_PER_CHANNEL, build, dyadic, rng

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py

C, SHORT, LONG = 3, 3, 5


def _two_tables(first_short: bool):
    """step_bias tables of SHORT and LONG steps in series (in either order), then a LIF."""
    r = rng(3)
    lengths = (SHORT, LONG) if first_short else (LONG, SHORT)
    lif = {k: np.asarray(v, dtype=np.float64) for k, v in LIF_PER_CHANNEL.items()}
    return build(TensorType((C,)), [
        ("sb1", "step_bias", ("x",), {}, {"bias": r.normal(0, 0.3, (lengths[0], C))}),
        ("sb2", "step_bias", ("sb1",), {}, {"bias": r.normal(0, 0.3, (lengths[1], C))}),
        ("lif", "lif", ("sb2",), {"reset": "zero"}, lif)])


@pytest.mark.parametrize("first_short", [True, False], ids=["short_first", "long_first"])
def test_the_shorter_of_two_step_tables_bounds_the_stream(first_short):
    graph = _two_tables(first_short)
    assert max_steps(graph) == SHORT
    model, init = export_step(graph)
    assert {p.key: p.value for p in model.metadata_props}["spikec.max_steps"] == str(SHORT)
    # (the interpreter runs only T equal to every table; onnxruntime streams any T up to the shorter one)
    got = run_stream(session(model), step_feeds(graph, dyadic(rng(1), (SHORT, 2, C)), np.float64), init)
    assert got["lif"].shape == (SHORT, 2, C)
    longer = step_feeds(graph, dyadic(rng(2), (SHORT + 1, 2, C)), np.float64)
    with pytest.raises(Exception, match="(?i)indices|bound"):   # one step past the shorter table: no statistics
        run_stream(session(model), longer, init)


def test_no_step_table_is_unbounded():
    graph = build(TensorType((C,)), [("lif", "lif", ("x",), {"reset": "zero"},
                                      {k: np.asarray(v, dtype=np.float64) for k, v in LIF_PER_CHANNEL.items()})])
    assert max_steps(graph) is None
    model, _ = export_step(graph)
    assert {p.key: p.value for p in model.metadata_props}["spikec.max_steps"] == "unbounded"


def test_an_unrolled_model_checked_on_inputs_of_another_length_is_refused_by_name():
    from spikec.ir.errors import BadInput
    from spikec.core.interpreter import run
    from spikec.targets.onnx import check_model_against, export
    graph = build(TensorType((C,)), [("lif", "lif", ("x",), {"reset": "zero"},
                                      {k: np.asarray(v, dtype=np.float64) for k, v in LIF_PER_CHANNEL.items()})])
    x = dyadic(rng(5), (4, 2, C))
    model = export(graph, 4)
    assert check_model_against(model, graph, x, run(graph, x))["equivalent"]
    for steps in (5, 3):   # longer and shorter
        other = dyadic(rng(6), (steps, 2, C))
        with pytest.raises(BadInput, match=f"exported for T=4 steps; the inputs have T={steps}"):
            check_model_against(model, graph, other, run(graph, other))
