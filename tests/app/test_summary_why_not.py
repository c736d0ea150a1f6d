"""The last summary line says what made a compile not equivalent: the refused or failed targets by name, else the
deployed graph, else a target's check; nothing is added to ``equivalent true``."""
from spikec.app.summary import _why_not


def test_each_cause_is_named():
    assert _why_not({"equivalent": True, "targets": {"lava": {"refused": True}}}) == ""
    two = _why_not({"equivalent": False, "targets": {"lava": {"refused": True}, "nir": {"refused": True},
                                                     "onnx": {"failed": True}}})
    assert two.startswith(" (target lava, nir refused; target onnx failed (a compiler bug):")
    assert "deployed graph differs" in _why_not({"equivalent": False, "targets": {}, "final": {"equivalent": False}})
    assert "a target's check failed" in _why_not({"equivalent": False, "targets": {"onnx": {"emitted": True}},
                                                  "final": {"equivalent": True}})
