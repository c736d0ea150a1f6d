"""A compile proves the trace and the passes together: one run of the source, one of the deployed IR.

The deployed graph is compared with the source model once (``checked: "end to end"`` on the frontend and on every
pass record); only when that fails are the traced graph and then each pass checked alone, so the error names the
part at fault, as before the shortcut.
"""
from pathlib import Path

import pytest

from spikec.app.driver import CompileOptions, compile_model
from spikec.core.passes import Pass, PassResult
from spikec.ir.errors import NotEquivalent
from spikec.passes.fold_batchnorm import FOLD_BATCHNORM

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
OPTS = dict(model=f"{DIGITS / 'model.py'}:small", weights=str(DIGITS / "checkpoint.pt"), target="none", batch=4)


def _runs(monkeypatch):
    """Every interpreter run a compile makes, by the module that asks for it."""
    import spikec.app.driver as driver
    import spikec.core.passes as passes
    import spikec.core.stream as stream
    calls = []
    for mod in (driver, passes, stream):
        real = mod.run
        monkeypatch.setattr(mod, "run", lambda *a, real=real, name=mod.__name__, **k: calls.append(name) or
                            real(*a, **k))
    return calls


def test_a_compile_runs_the_ir_once_and_labels_its_proof(monkeypatch):
    calls = _runs(monkeypatch)
    c = compile_model(CompileOptions(**OPTS))
    assert calls == ["spikec.app.driver"]
    r = c.report
    assert r["equivalent"] and r["frontend"]["checked"] == "end to end"
    same = ("spikes_compared", "values_compared", "spike_mismatches", "real_mismatches", "max_rel_diff")
    assert r["frontend"]["spikes_compared"] > 0 and all(r["final"][k] == r["frontend"][k] for k in same)
    assert [p["checked"] for p in r["passes"]] == ["end to end"] * len(r["passes"])
    assert all("the deployed graph against the source model" in p["comparison"]["checked"] for p in r["passes"])
    fold = next(p for p in r["passes"] if p["name"] == "fold_batchnorm")
    assert fold["nodes_changed"] and fold["params_after"] < fold["params_before"]
    from spikec.app.summary import summary_text
    lines = [line for line in summary_text(r).splitlines() if line.startswith("  pass ")]
    assert any("fold_batchnorm" in line and line.endswith("checked end to end") for line in lines)
    # a pass that changed nothing had nothing to check: its line does not claim a check
    assert all(not line.endswith("checked end to end") for line in lines if " 0 nodes changed" in line)


def _wrong(graph):
    head = graph.node("head.1")
    node = head.with_(params={**head.params, "weight": head.params["weight"] * 1.01})
    return PassResult(graph.with_nodes([node if n.name == "head.1" else n for n in graph.nodes]), ("head.1",))


def test_a_wrong_pass_is_still_named_after_the_end_to_end_check_fails(monkeypatch):
    """The end-to-end comparison differs: the traced graph is checked, then the passes one by one."""
    wrong = Pass("scale_head", _wrong, requires="anything", ensures="a wrong head")
    monkeypatch.setattr("spikec.app.driver.select", lambda spec: ([FOLD_BATCHNORM, wrong], False))
    calls = _runs(monkeypatch)
    with pytest.raises(NotEquivalent) as info:
        compile_model(CompileOptions(**OPTS))
    assert "'scale_head'" in info.value.message() and "fold_batchnorm" in info.value.message()
    assert calls[0] == "spikec.app.driver" and len(calls) >= 3   # end to end, the traced graph, the passes
