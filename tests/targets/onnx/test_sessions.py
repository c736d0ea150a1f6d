"""onnxruntime sessions: kept per model and thread count inside ``reused()`` only, with torch's thread count."""
import torch
from onnx import TensorProto, helper

from spikec.targets.onnx import sessions


def model(k: float) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])
    c = helper.make_tensor("c", TensorProto.DOUBLE, [1], [k])
    g = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"])], "g", [x], [y], [c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_sessions_are_kept_inside_reused_only():
    a, b = model(2.0), model(3.0)
    assert sessions.session(a) is not sessions.session(a)   # outside: nothing kept
    with sessions.reused():
        first = sessions.session(a)
        assert sessions.session(a) is first and sessions.session(b) is not first
        with sessions.reused():   # nested: the outer cache stays
            assert sessions.session(a) is first
        assert sessions.session(a) is first
    assert sessions.session(a) is not first


def test_a_session_runs_with_torchs_thread_count():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        s = sessions.session(model(2.0))
        assert s.get_session_options().intra_op_num_threads == 1
        assert s.run(["y"], {"x": [1.5, -2.0]})[0].tolist() == [3.0, -4.0]
    finally:
        torch.set_num_threads(before)
