"""``--coding ttfs`` through the normal pipeline: the pass manager runs and records the pass, the verifier's
verdict (a TargetResult) is the report's ``ttfs`` object, ONNX exports the TTFS graph, and ``spikec verify``
re-checks all of it (LayerNorm labelled APPROXIMATE)."""
import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from spikec.app.cli import main
from spikec.core.cost import E_AC_PJ, E_MAC_PJ
from spikec.ir.errors import NotEquivalent, PassError
from spikec.frontend import trace
from spikec.core.passes import run_passes
from spikec.codings.ttfs.timing_pass import make_pass
from spikec.targets.ttfs import lower_ttfs, verify_ttfs
from test_layernorm import _random_ln, _rows

MODELS = '''
import torch
from torch import nn


class Net(nn.Module):
    input_shape, steps = (12,), 1

    def __init__(self, norm):
        super().__init__()
        torch.manual_seed(0)
        self.fc, self.out = nn.Linear(12, 12), nn.Linear(12, 3)
        self.norm = nn.LayerNorm(12) if norm else nn.Identity()

    def forward(self, x):
        return self.out(torch.relu(self.norm(self.fc(x))))


def relu_mlp():
    return Net(norm=False)


def ln_mlp():
    return Net(norm=True)
'''


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "nets.py"
    path.write_text(MODELS)
    return path


def _compile(models, factory, out, *extra):
    result = cli("compile", f"{models}:{factory}", "--coding", "ttfs", "-o", out, *extra)
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text())


def test_exact_mapping_is_a_recorded_pass_and_verifies(models, tmp_path):
    out = tmp_path / "relu"
    report = _compile(models, "relu_mlp", out)
    record = report["passes"][-1]
    assert record["name"] == "assign_ttfs_timing" and record["comparison"]["equivalent"]
    assert record["spike_mismatches"] == 0 and record["max_rel_diff"] <= 1e-9
    t = report["ttfs"]
    assert report["equivalent"] and t["verified"] and t["exact"] and report["final"]["equivalent"]
    assert report["final"]["approximate"] is False
    with np.load(out / "io.npz") as io:
        assert "deployed_output" not in io.files       # exact: the source's own outputs are the reference
    result = cli("verify", out, "--run-source")
    assert result.exit_code == 0, result.output
    assert "APPROXIMATE" not in result.output


def test_layernorm_exports_to_onnx_and_verifies_as_approximate(models, tmp_path):
    out = tmp_path / "ln"
    report = _compile(models, "ln_mlp", out, "--target", "onnx")
    record = report["passes"][-1]
    assert record["name"] == "assign_ttfs_timing" and record["comparison"]["equivalent"]
    assert "APPROXIMATE" in record["notes"][0] and "decomposed ANN" in record["notes"][0]
    t, target = report["ttfs"], report["target"]
    assert t["verified"] and t["exact"] is False and t["approximations"]
    assert not report["final"]["equivalent"] and report["final"]["approximate"] and report["equivalent"]
    assert target["name"] == "onnx" and target["equivalent"] and target["max_rel_diff"] <= 1e-12
    assert (out / "model.onnx").is_file()
    result = cli("verify", out, "--run-source")
    assert result.exit_code == 0, result.output
    assert "target_onnx" in result.output and "APPROXIMATE" in result.output


def test_targets_without_a_ttfs_lowering_are_refused_before_any_work(models, tmp_path):
    result = cli("compile", f"{models}:relu_mlp", "--coding", "ttfs", "--target", "nir", "-o", tmp_path / "o")
    assert result.exit_code == 2 and "no lowering for a TTFS graph" in result.output
    assert "--target none or onnx or lava" in result.output and not (tmp_path / "o").exists()


def test_the_pass_refuses_an_undecomposed_layernorm_naming_it():
    m = _random_ln(0)
    g = trace(m, (12,), input_kind="real")
    x = _rows(np.random.default_rng(0), 8, 12)
    with pytest.raises(PassError) as e:
        run_passes(g, [make_pass(x)], x)
    assert "assign_ttfs_timing" in e.value.where and "'norm'" in e.value.where
    assert "decomposed" in e.value.what and "--coding ttfs" in e.value.remedy


def test_the_verifier_refuses_a_graph_the_mapping_did_not_make():
    m = _random_ln(1)
    g = trace(m, (12,), input_kind="real")
    x = _rows(np.random.default_rng(1), 8, 12)
    deployed, (record,), _ = lower_ttfs(m, g, x, {"states": ()})
    assert record.comparison["equivalent"]
    fire = next(n for n in deployed.nodes if n.op == "ttfs_fire")
    nudged = fire.with_(params={"threshold": fire.params["threshold"] + 1e-3})
    other = dataclasses.replace(deployed, nodes=tuple(nudged if n is fire else n for n in deployed.nodes))
    with pytest.raises(NotEquivalent, match="not the one timing assignment makes"):
        verify_ttfs(m, g, other, x, {"states": ()})


def test_energy_uses_the_shared_cost_model():
    m = _random_ln(2)
    g = trace(m, (12,), input_kind="real")
    x = _rows(np.random.default_rng(2), 8, 12)
    deployed, _, trace_run = lower_ttfs(m, g, x, {"states": ()})
    verdict = verify_ttfs(m, g, deployed, x, {"states": ()}, reference=trace_run)
    energy, spikes = verdict.report["energy"], verdict.report["spikes"]
    constants = energy["energy_constants_pj"]
    assert verdict.ok and constants["ac"] == E_AC_PJ and constants["mac"] == E_MAC_PJ
    assert energy["synaptic_energy_pj"] == pytest.approx(spikes["synaptic_events_per_inference"] * E_AC_PJ
                                                         + spikes["dynamic_products_per_inference"] * E_MAC_PJ)
