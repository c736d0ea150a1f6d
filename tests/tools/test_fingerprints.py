"""tools/fingerprints.py: what it leaves out of a report, and that a changed figure is found by its path."""
import json

from tools_modules import load

fp = load("fingerprints")


def test_volatile_keys_and_durations_are_left_out_and_figures_kept():
    report = {"equivalent": True, "compile_seconds": 3.2, "outdir": "/x", "spikes": 98304,
              "lava": {"summary": "bit_exact true (Lava fixed_pt sim 3.27 s)", "max_rel_diff": 1.0000000000001e-10}}
    assert fp.normal(report) == {"equivalent": True, "spikes": 98304,
                                 "lava": {"summary": "bit_exact true (Lava fixed_pt sim <time>)",
                                          "max_rel_diff": 1e-10}}


def test_a_changed_figure_is_named_by_its_path(tmp_path):
    a = {"ex": {"sha256": "1", "report": {"layers": [{"spikes": 3}, {"spikes": 4}], "equivalent": True}}}
    b = {"ex": {"sha256": "2", "report": {"layers": [{"spikes": 3}, {"spikes": 5}], "equivalent": True}}}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert fp.differences(a["ex"]["report"], b["ex"]["report"]) == [".layers[1].spikes: 4 -> 5"]
    assert fp.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    assert fp.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0
