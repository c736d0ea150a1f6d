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


def test_an_approximate_variant_is_the_cause_and_a_refusal_under_all_is_not():
    variant = {"lava": {"emitted": True, "approximate_variant": {"option": "lava_reset='zero'"}},
               "nir": {"refused": True}}
    under_all = _why_not({"equivalent": False, "targets": variant, "options": {"target": "all"}})
    assert under_all.startswith(" (target lava deployed the approximate chip-ready variant (lava_reset='zero'), "
                                "never equivalent:") and "nir" not in under_all
    named = _why_not({"equivalent": False, "targets": variant, "options": {"target": "lava,nir"}})
    assert "target nir refused" in named and named.index("approximate") < named.index("nir refused")
