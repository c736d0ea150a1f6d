"""The shipped SDNA backbones compile with the default passes (which unroll every integer neuron) and stay
equivalent; the report carries the schedule, the product classification and the per-block figures."""
from pathlib import Path

import pytest

from spikec.app.driver import CompileOptions, compile_model

SDNA = Path(__file__).resolve().parents[2] / "examples" / "sdna"
CASES = [("static_linear", "static"), ("static_pairwise", "static"), ("event_linear", "event"),
         ("event_pairwise", "event")]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def report(request):
    factory, data = request.param
    opts = CompileOptions(f"{SDNA / 'model.py'}:{factory}", weights=str(SDNA / f"{data}.pt"),
                          inputs=str(SDNA / f"inputs_{data}.npz"), passes="default")
    return compile_model(opts).report


def test_compiles_unrolled_and_equivalent(report):
    assert report["equivalent"] is True
    unroll = next(r for r in report["passes"] if r["name"] == "unroll_virtual_steps")
    assert unroll["nodes_changed"] and unroll["spike_mismatches"] == 0
    ops = {l["op"] for l in report["layers"]}
    assert "intfire" not in ops and "intfire_unrolled" in ops
    assert all(l["lowering"].startswith("binary spikes over 4") for l in report["layers"] if "lowering" in l)


def test_schedule_counts_sub_steps(report):
    schedule = report["schedule"]
    assert schedule["latency_substeps_per_step"] >= 4 * 2   # at least two unrolled layers in a chain
    assert {u["substeps"] for u in schedule["unrolled"]} == {4}


def test_blocks_and_products_are_reported(report):
    blocks = report["sdna"]
    assert len(blocks) == 2
    for b in blocks:
        per_gate = b["window"] ** 2 if b["variant"] == "pairwise" else 1
        assert b["gate_evaluations_per_step"] == b["tokens"] * b["channels"] * per_gate
        assert b["products"].endswith("not spike-driven")
    products = [l["product"] for l in report["layers"] if "product" in l]
    assert products and all("not spike-driven" in p for p in products)   # integer Q/K/V: never an AND
