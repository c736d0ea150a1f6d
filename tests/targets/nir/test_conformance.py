"""NIR import conformance: ``spikec nir-check`` and ``NIRModel.nir_diagnostics``.

Every diagnostic kind is triggered by a small graph built from nir's own classes and absent from a clean
one; the NIR paper's files (tests/fixtures/nir_paper, see PROVENANCE.md) are checked and, where spikec
reads them, compiled with ``--target none``; the paper's LIF reproduces its spike steps 460, 510, 710, 760.
"""
import json
from pathlib import Path

import nir
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from spikec.app.cli import main
from spikec.ir.errors import BadInput
from spikec.targets.nir.check import check_file
from spikec.formats.nir.conformance import nir_diagnostics, read_nir
from spikec.frontend.nir_file import load_nir, nir_model

PAPER = Path(__file__).resolve().parents[2] / "fixtures" / "nir_paper"
DT = 1e-4
N = 3
# paper/01_lif/lif_norse.ipynb: d0, each entry followed by nine zeros (1000 steps of dt = 1e-4)
D0 = [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 0,
      1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1,
      1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
PAPER_SPIKES = [460, 510, 710, 760]  # paper/01_lif/lif_norse.csv and lif_exact.csv


def lif(tau=1e-3, r=1.0):
    return nir.LIF(tau=np.full(N, tau), r=np.full(N, r), v_leak=np.zeros(N), v_threshold=np.ones(N),
                   v_reset=np.zeros(N))


def graph(*middle, type_check=True):
    """Input(N) -> middle... -> Output(N), a chain."""
    names = ["input"] + [f"n{i}" for i in range(len(middle))] + ["output"]
    nodes = {"input": nir.Input(input_type={"input": np.array([N])}),
             **{f"n{i}": m for i, m in enumerate(middle)}, "output": nir.Output(output_type={"output": np.array([N])})}
    return nir.NIRGraph(nodes=nodes, edges=list(zip(names, names[1:])), type_check=type_check)


def kinds(g, dt=DT, scheme="snntorch"):
    return {f["kind"]: f for f in nir_diagnostics(g, dt, scheme)}


def clean():
    return graph(nir.Linear(weight=np.eye(N)), lif())


def test_a_clean_graph_has_only_the_discretization_recorded():
    found = nir_diagnostics(clean(), DT, "norse")
    assert [f["kind"] for f in found] == ["discretization"]
    assert "dt = 0.0001" in found[0]["message"] and "'norse'" in found[0]["message"]
    assert found[0]["severity"] == "info"


@pytest.mark.parametrize("node, kind, severity", [
    (lif(tau=-1e-3), "negative_tau", "error"),
    (lif(tau=5e-5), "dt_over_tau", "error"),
    (lif(tau=DT), "zero_decay", "warning"),
    (nir.CubaLIF(tau_syn=np.full(N, 1e-3), tau_mem=np.full(N, DT), r=np.ones(N), v_leak=np.zeros(N),
                 v_threshold=np.ones(N), v_reset=np.zeros(N), w_in=np.full(N, 10.0)), "zero_decay", "warning"),
    (lif(r=2.0), "r_not_one", "warning"),
    (lif(tau=1e-7), "norse_tau_convention", "warning"),
    (nir.IF(r=np.ones(N), v_threshold=np.ones(N), v_reset=np.zeros(N)), "if_as_leaky", "warning"),
    (nir.Affine(weight=np.eye(N), bias=np.zeros(N)), "zero_bias", "info"),
    (nir.Affine(weight=np.eye(N), bias=np.ones(N)), "nirtorch_affine_bias", "warning"),
    (nir.Affine(weight=np.eye(N), bias=np.ones(N - 1)), "bias_dropped", "error"),
])
def test_each_kind_is_found_on_a_node(node, kind, severity):
    found = kinds(graph(node, type_check=False))
    assert kind in found, found
    assert found[kind]["node"] == "n0" and found[kind]["severity"] == severity
    assert kind not in kinds(clean())


def test_a_cubalif_firing_on_its_current_is_named_as_spikecs_form():
    """tau_mem = dt in a CubaLIF is the reset cycle's membrane-is-current form (composed.membrane_cuba), not a lost
    state; an LIF's tau = dt is still named an artefact."""
    cuba = nir.CubaLIF(tau_syn=np.full(N, 1e-3), tau_mem=np.full(N, DT), r=np.ones(N), v_leak=np.zeros(N),
                       v_threshold=np.ones(N), v_reset=np.zeros(N), w_in=np.full(N, 10.0))
    assert "membrane is the synaptic current" in kinds(graph(cuba, type_check=False))["zero_decay"]["message"]
    assert "artefact" in kinds(graph(lif(tau=DT), type_check=False))["zero_decay"]["message"]


def test_the_consumer_findings_name_the_version_read():
    found = kinds(graph(nir.Affine(weight=np.eye(N), bias=np.ones(N)), lif(tau=1e-7, r=1.0),
                        nir.IF(r=np.full(N, 2.0), v_threshold=np.ones(N), v_reset=np.zeros(N))))
    assert "nirtorch 2.6" in found["nirtorch_affine_bias"]["message"]
    assert "Norse 1.1.0" in found["norse_tau_convention"]["message"]
    assert "snnTorch 1.0.0" in found["if_as_leaky"]["message"] and "beta=0.9" in found["if_as_leaky"]["message"]
    assert "Norse 1.1.0" in found["r_not_one"]["message"]


def cuba(r_factor):
    tau_mem = 1e-3
    return nir.CubaLIF(tau_syn=np.full(N, 2e-4), tau_mem=np.full(N, tau_mem), r=np.full(N, tau_mem / DT * r_factor),
                       v_leak=np.zeros(N), v_threshold=np.ones(N), v_reset=np.zeros(N), w_in=np.full(N, 2.0))


def test_snntorch_cubalif_threshold_scaling():
    assert "snntorch_cubalif_threshold" not in kinds(graph(cuba(1.0)))  # r dt/tau_mem == 1: snnTorch is right
    off = kinds(graph(cuba(1 + 1e-6)))["snntorch_cubalif_threshold"]  # passes np.allclose, threshold off by 1e-6
    assert off["severity"] == "warning" and "off by up to 1e-06" in off["message"] and "snnTorch 1.0.0" in off["message"]
    refused = kinds(graph(cuba(0.5)))["snntorch_cubalif_threshold"]
    assert "the import raises" in refused["message"]
    assert "not at dt = 0.001" in kinds(graph(cuba(1.0)), dt=1e-3)["snntorch_cubalif_threshold"]["message"]


def test_missing_shapes():
    no_shape = graph(nir.SumPool2d(kernel_size=np.array([1, 1]), stride=np.array([1, 1]), padding=np.array([0, 0])),
                     type_check=False)
    assert kinds(no_shape)["missing_shape"]["severity"] == "warning"
    g = clean()
    g.nodes["input"].input_type = {"input": None}
    found = kinds(g)["missing_shape"]
    assert found["node"] == "input" and found["severity"] == "error"


def test_an_edge_to_a_missing_node_in_a_subgraph():
    sub = nir.NIRGraph(nodes={"input": nir.Input(input_type={"input": np.array([N])}), "lif1": lif(),
                              "output": nir.Output(output_type={"output": np.array([N])})},
                       edges=[("input", "lif"), ("lif", "output")], type_check=False)
    found = kinds(graph(sub, type_check=False))["dangling_edge"]
    assert found["node"] == "n0" and found["severity"] == "error" and "'lif1'" in found["message"]


def test_an_unknown_node_type():
    class Mystery(nir.Scale):
        pass
    found = kinds(graph(Mystery(scale=np.ones(N)), type_check=False))["unsupported_node"]
    assert found["severity"] == "error"


def test_bad_dt_or_scheme_is_bad_input():
    with pytest.raises(BadInput):
        nir_diagnostics(clean(), 0.0, "snntorch")
    with pytest.raises(BadInput):
        nir_diagnostics(clean(), DT, "lava")


def test_a_file_nir_refuses_is_read_leniently(tmp_path):
    g = graph(nir.Linear(weight=np.eye(N)), lif(), type_check=False)
    g.nodes["output"].output_type = {"output": np.array([N, 1, 1])}  # what Rockpool writes
    g.nodes["output"].input_type = {"input": np.array([N, 1, 1])}
    path = tmp_path / "loose.nir"
    nir.write(path, g)
    with pytest.raises(Exception):
        nir.read(path)
    read, found = read_nir(path)
    assert [f["kind"] for f in found] == ["lenient_read", "type_inferred"]
    assert found[1]["node"] == "output" and tuple(read.nodes["output"].output_type["output"]) == (N,)
    with pytest.warns(UserWarning, match="strict read refused"):
        model = nir_model(path, DT)
    assert [f["kind"] for f in model.nir_diagnostics][:2] == ["lenient_read", "type_inferred"]
    assert load_nir(path, DT).outputs


def test_the_model_carries_its_diagnostics_for_the_report():
    model = nir_model(PAPER / "cnn_sinabs.nir", DT)
    found = {f["kind"] for f in model.nir_diagnostics}
    assert {"discretization", "if_as_leaky", "zero_bias"} <= found
    json.dumps(model.nir_diagnostics)  # report.json-ready


# -- the NIR paper's files ------------------------------------------------------------------------------------

EXPECTED = {  # file: (exit code, kinds that must be there)
    "lif_norse": (0, {"discretization", "zero_bias"}),
    "lif_rockpool": (0, {"lenient_read", "type_inferred", "r_not_one"}),
    "two_lif_neurons": (0, {"discretization"}),
    "cnn_sinabs": (0, {"if_as_leaky", "zero_bias", "nirtorch_affine_bias"}),
    "braille_noDelay_bias_zero": (0, {"nirtorch_affine_bias", "snntorch_cubalif_threshold", "cycle_bias_first_step"}),
    "braille_noDelay_noBias_subtract": (0, {"discretization", "r_not_one"}),
    "braille_noDelay_bias_zero_subgraph": (1, {"lenient_read", "dangling_edge"}),
    "braille_noDelay_noBias_subtract_subgraph": (1, {"lenient_read", "dangling_edge"}),
}


def test_every_paper_file_is_here():
    assert {p.stem for p in PAPER.glob("*.nir")} == set(EXPECTED)
    assert (PAPER / "PROVENANCE.md").read_text().count("neuromorphs/NIR") >= 1


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_nir_check_on_the_paper_files(name):
    code, must = EXPECTED[name]
    result = CliRunner().invoke(main, ["nir-check", str(PAPER / f"{name}.nir"), "--dt", "1e-4", "--json"])
    assert result.exit_code == code, result.output
    report = json.loads(result.output)
    assert must <= {f["kind"] for f in report["findings"]}
    assert report["compiles"] == (code == 0) and report["dt"] == DT and report["scheme"] == "snntorch"
    text = CliRunner().invoke(main, ["nir-check", str(PAPER / f"{name}.nir")])
    assert text.exit_code == code
    lines = text.output.strip().splitlines()
    assert len(lines) == len(report["findings"]) + 1 and ("unusable" in lines[-1]) == bool(code)


def test_nir_check_bad_input_exits_2(tmp_path):
    assert CliRunner().invoke(main, ["nir-check", str(tmp_path / "missing.nir")]).exit_code == 2
    junk = tmp_path / "junk.nir"
    junk.write_bytes(b"not hdf5")
    assert CliRunner().invoke(main, ["nir-check", str(junk)]).exit_code == 2


def test_nir_check_dt_over_tau_exits_1():
    result = CliRunner().invoke(main, ["nir-check", str(PAPER / "lif_norse.nir"), "--dt", "1e-2"])
    assert result.exit_code == 1 and "dt_over_tau" in result.output


def paper_input():
    x = np.zeros((1000, 1, 1))
    x[::10, 0, 0] = D0
    return x


@pytest.mark.parametrize("scheme", ["snntorch", "norse"])
def test_lif_norse_reproduces_the_paper_spikes(scheme, tmp_path):
    """The paper's LIF at its dt = 1e-4: the NIR model and the compiled graph (--target none) spike at the
    paper's steps 460, 510, 710, 760 (Norse's trace and the exact simulation)."""
    x = paper_input()
    y = nir_model(PAPER / "lif_norse.nir", DT, scheme)(torch.as_tensor(x)).numpy()
    assert np.flatnonzero(y[:, 0, 0] > 0).tolist() == PAPER_SPIKES
    np.savez(tmp_path / "in.npz", input=x)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", str(PAPER / "lif_norse.nir"), "-o", str(out), "--target", "none",
                                       "--dt", "1e-4", "--nir-scheme", scheme, "--inputs", str(tmp_path / "in.npz"),
                                       "--no-probes"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "report.json").read_text())["equivalent"]
    deployed = np.load(out / "io.npz")["output"]
    assert np.flatnonzero(deployed[:, 0, 0] > 0).tolist() == PAPER_SPIKES


def test_lif_rockpool_as_rockpool_wrote_it():
    """Rockpool's re-export (weight 0.04, r = 24.02: an input gain of 0.961, not Norse's 1) spikes later
    than the paper's LIF; spikec runs the file as written."""
    y = nir_model(PAPER / "lif_rockpool.nir", DT)(torch.as_tensor(paper_input())).numpy()
    assert np.flatnonzero(y[:, 0, 0] > 0).tolist() == [460, 520, 720, 780]


@pytest.mark.parametrize("name", ["lif_rockpool", "two_lif_neurons", "cnn_sinabs"])
def test_the_other_readable_paper_files_compile(name, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", str(PAPER / f"{name}.nir"), "-o", str(out), "--target", "none",
                                       "--steps", "4", "--batch", "2", "--no-probes"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "report.json").read_text())["equivalent"]


def test_check_file_agrees_with_the_cli():
    result = check_file(PAPER / "lif_norse.nir", DT, "norse")
    assert result["compiles"] and result["findings"][0]["kind"] == "discretization"


# -- the consumer behaviours the findings name, probed in the installed packages ---------------------------------

def test_nirtorch_default_affine_map_drops_the_bias():
    mapping = pytest.importorskip("nirtorch.nir_interpreter")
    module = mapping._default_map_affine(nir.Affine(weight=np.eye(2, dtype=np.float32),
                                                    bias=np.full(2, 5.0, dtype=np.float32)))
    assert not torch.allclose(module(torch.zeros(2)), torch.full((2,), 5.0))  # torch's random bias, not 5


def test_snntorch_reads_if_as_a_leaky_neuron():
    pytest.importorskip("snntorch")
    import snntorch as snn
    from snntorch.import_nir import _nir_to_snntorch_module
    mod = _nir_to_snntorch_module(nir.IF(r=np.ones(N), v_threshold=np.ones(N), v_reset=np.zeros(N)))
    assert isinstance(mod, snn.Leaky) and float(mod.beta) == pytest.approx(0.9)


def test_norse_to_nir_writes_dt_times_tau_and_the_finding_names_it():
    norse = pytest.importorskip("norse.torch")
    cell = norse.SequentialState(torch.nn.Linear(1, 1, bias=False), norse.LIFBoxCell(
        p=norse.LIFBoxParameters(tau_mem_inv=torch.tensor([400.0]), v_th=torch.tensor([0.1]),
                                 v_leak=torch.tensor([0.0])), dt=DT))
    written = norse.to_nir(cell, torch.zeros(1, 1), dt=DT)
    lif_node = next(v for v in written.nodes.values() if isinstance(v, nir.LIF))
    assert float(np.asarray(lif_node.tau).ravel()[0]) == pytest.approx(DT / 400)  # not 1/400 = 0.0025
    assert "norse_tau_convention" in {f["kind"] for f in nir_diagnostics(written, DT, "norse")}


def test_every_nir_compile_reports_its_diagnostics():
    from spikec.app.driver import CompileOptions, compile_model
    paper = Path(__file__).resolve().parents[2] / "fixtures" / "nir_paper" / "lif_norse.nir"
    report = compile_model(CompileOptions(str(paper), steps=4, batch=1)).report
    kinds = {d["kind"] for d in report["frontend"]["nir_diagnostics"]}
    assert "discretization" in kinds and all({"node", "kind", "message"} <= set(d)
                                             for d in report["frontend"]["nir_diagnostics"])


def test_nir_check_names_a_file_spikec_refuses(tmp_path):
    """The Braille RNN with a nonzero v_reset is no longer RSynaptic: nir-check exits 1 with spikec's reason."""
    g = nir.read(PAPER / "braille_noDelay_noBias_subtract.nir")
    g.nodes["lif1.lif"].v_reset = np.full(40, 0.5)
    nir.write(tmp_path / "reset.nir", g)
    result = CliRunner().invoke(main, ["nir-check", str(tmp_path / "reset.nir"), "--dt", "1e-4", "--json"])
    assert result.exit_code == 1, result.output
    refused = [f for f in json.loads(result.output)["findings"] if f["kind"] == "spikec_refuses"]
    assert len(refused) == 1 and "v_reset != 0" in refused[0]["message"]
