"""The rules example: every rewrite rule fires and every refusal is taken, in one compile of the CLI.

So that the runtime checks of a compile (not only unit tests) exercise each pass's rules: a mutation
of any of them (tools/mutation.py) makes this example's compile fail its proof.
"""
import json
from pathlib import Path

from click.testing import CliRunner

from spikec.app.cli import main

RULES = Path(__file__).resolve().parents[2] / "examples" / "rules"


def test_every_rule_runs_and_the_compile_is_equivalent(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", f"{RULES / 'model.py'}:rules", "--inputs", str(RULES / "inputs.npz"),
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["equivalent"] is True
    passes = {p["name"]: p for p in report["passes"]}
    skipped = {s["node"]: s["reason"] for p in report["passes"] for s in p["skipped"]}
    notes = " ".join(n for p in report["passes"] for n in p["notes"])
    # refused, each for its own reason
    assert "count_include_pad=False" in skipped["no_pad_count.add_1"]
    assert "between the 1x1 and the 3x3" in skipped["bias_between.add_2"]
    assert "not centred" in skipped["uncentred.add_3"]
    assert "zero-padded" in skipped["pre_padded.0"]
    # rewritten
    ops = {layer["name"]: layer["op"] for layer in report["layers"]}
    # BN -> Heaviside (negative gammas) and BN -> unpadded conv folded: only the refused BN is left
    assert [name for name, op in ops.items() if op == "batchnorm"] == ["pre_padded.0"]
    assert "bias schedule" in notes                                            # BNTT: constant scale, varying shift
    assert "biased.add" in passes["fuse_repconv"]["nodes_changed"]             # biased branch convs fused
    assert "pairwise order -> linear" in notes                                 # Q (K^T V)
    assert report["final"]["spike_mismatches"] == 0 and report["final"]["spikes_compared"] > 100_000
