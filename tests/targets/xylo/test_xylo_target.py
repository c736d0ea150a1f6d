"""``--target xylo`` end to end on snnTorch networks as their users write them: the keyword-spotting-sized network
(16 channels, a recurrent RLeaky hidden layer, 8 outputs, default subtract reset) compiles unchanged; XyloSim and
spikec's reference agree bit for bit; XyloSim rebuilt by hand from ``xylo/spec.npz`` reproduces ``xylo/io.npz``;
``verify_outdir`` re-checks the files and fails on a tampered one; what Xylo cannot take is refused by name."""
import json
import shutil
import textwrap

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

snn = pytest.importorskip("snntorch")
pytest.importorskip("xylosim.v2")
pytest.importorskip("rockpool")

import spikec  # noqa: E402
from spikec.app.cli import main  # noqa: E402
from spikec.ir.errors import UnsupportedOp  # noqa: E402
from spikec.core.interpreter import run  # noqa: E402
from spikec.core.serialize import load_graph  # noqa: E402
from spikec.targets.xylo import SPEC_FILE, IO_FILE, verify_outdir  # noqa: E402
from spikec.targets.xylo._shim import import_xylosim  # noqa: E402
from spikec.targets.xylo.quantize import SPEC_KEYS  # noqa: E402

KWS = textwrap.dedent('''
    import torch, snntorch as snn
    from torch import nn

    def kws():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(16, 32), snn.RLeaky(beta=0.875, linear_features=32, init_hidden=True),
                             nn.Linear(32, 8), snn.Leaky(beta=0.75, init_hidden=True))
''')


def spikes(t=12, b=3, c=16, p=0.3, seed=0):
    return (np.random.default_rng(seed).random((t, b, c)) < p).astype(np.float32)


@pytest.fixture(scope="module")
def kws_out(tmp_path_factory):
    """The network compiled by the CLI, unchanged, with --target xylo."""
    d = tmp_path_factory.mktemp("kws")
    (d / "kws.py").write_text(KWS)
    np.savez(d / "x.npz", input=spikes())
    result = CliRunner().invoke(main, ["compile", f"{d / 'kws.py'}:kws", "--inputs", str(d / "x.npz"),
                                       "-o", str(d / "out"), "--target", "xylo"])
    assert result.exit_code == 0, result.output
    return d / "out"


def test_kws_compiles_bit_exact_on_xylosim(kws_out):
    report = json.loads((kws_out / "report.json").read_text())
    t = report["target"]
    assert report["equivalent"] and t["name"] == "xylo" and t["bit_exact"] and not t["first_mismatches"]
    assert t["samples"] >= 3 and t["values_compared"] > 0 and "xylosim 0.1.3 (xylosim.v2" in t["simulator"]
    assert t["resources"]["inputs"] == {"used": 16, "of": 16} and t["resources"]["output_neurons"]["used"] == 8
    assert t["resources"]["synapses"]["recurrent"] > 0            # the RLeaky's Linear recurrence is mapped
    q = t["quantization"]
    assert q["hidden"]["beta_exact_as_shift"] and q["hidden"]["dash_mem"][0] == 3     # 0.875 = 1 - 2**-3
    assert q["output"]["beta_exact_as_shift"] and q["output"]["dash_mem"][0] == 2     # 0.75 = 1 - 2**-2
    f = t["float_vs_fixed"]
    assert f["approximate"] and not f["exact_vs_source"]
    why = " ".join(f["why_not_exact"])
    assert "delayed reset" in why and "no synaptic state" in why and "not 1 - 2**-k" not in why
    assert f["output_spike_agreement"] > 0.8 and f["hidden_spike_agreement"] > 0.8   # measured 0.97 / 0.94


def test_xylosim_rebuilt_by_hand_reproduces_io(kws_out):
    XyloSim = import_xylosim()
    spec = np.load(kws_out / SPEC_FILE)
    assert sorted(spec.files) == sorted(SPEC_KEYS)
    sim = XyloSim.from_specification(**spec)                      # the two lines the docs give
    io = np.load(kws_out / IO_FILE)
    outs = []
    for raster in io["input"]:
        sim.reset_state()
        outs.append(sim.evolve(raster)[0])
    assert np.array_equal(np.stack(outs), io["output"]) and io["output"].any()
    assert np.array_equal(io["input"][:, :-1].transpose(1, 0, 2), np.load(kws_out / "io.npz")["input"])


def test_verify_rechecks_and_fails_on_a_tampered_spec(kws_out, tmp_path):
    graph = load_graph(kws_out)
    x = np.load(kws_out / "io.npz")["input"]
    ok = verify_outdir(kws_out, graph, x, run(graph, x))
    assert ok["equivalent"] and ok["rebuilt_xylosim_reproduces_io"] and ok["spec_matches_graph"]
    other = spikes(t=5, b=2, seed=9)                                   # inputs other than the compile's
    again = verify_outdir(kws_out, graph, other, run(graph, other))
    assert again["equivalent"] and not again["input_is_the_recorded_one"] and again["bit_exact_on_these_inputs"]
    bad = tmp_path / "bad"
    shutil.copytree(kws_out, bad)
    spec = dict(np.load(bad / SPEC_FILE))
    spec["threshold"] = spec["threshold"] + 1
    np.savez(bad / SPEC_FILE, **spec)
    tampered = verify_outdir(bad, graph, x, run(graph, x))
    assert not tampered["equivalent"] and not tampered["spec_matches_graph"]
    (bad / SPEC_FILE).unlink()
    assert not verify_outdir(bad, graph, x, run(graph, x))["equivalent"]


def _xylo(net, x, targets="xylo"):
    return spikec.compile(net, x, targets=targets, batch=None)


@pytest.mark.parametrize("net, c_in, words", [
    (lambda: nn.Sequential(nn.Linear(16, 8), snn.Synaptic(alpha=0.5, beta=0.5, reset_mechanism="zero",
                                                          init_hidden=True),
                           nn.Linear(8, 4), snn.Leaky(beta=0.5, init_hidden=True)), 16, ("reset 'zero'", "subtract")),
    (lambda: nn.Sequential(nn.Linear(16, 8), snn.Leaky(beta=0.5, reset_mechanism="zero", init_hidden=True),
                           nn.Linear(8, 4), snn.Leaky(beta=0.5, init_hidden=True)), 16, ("op 'lif'",)),
    (lambda: nn.Sequential(nn.Linear(17, 8), snn.Leaky(beta=0.5, init_hidden=True),
                           nn.Linear(8, 4), snn.Leaky(beta=0.5, init_hidden=True)), 17, ("17 inputs", "has 16")),
    (lambda: nn.Sequential(nn.Linear(16, 8), snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(8, 8),
                           snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(8, 4),
                           snn.Leaky(beta=0.5, init_hidden=True)), 16, ("one hidden population",)),
    (lambda: nn.Sequential(nn.Linear(16, 8), snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(8, 4),
                           snn.RLeaky(beta=0.5, linear_features=4, init_hidden=True)), 16, ("output layer is recurrent",)),
])
def test_refused_by_name_with_the_reason(net, c_in, words):
    torch.manual_seed(0)
    c = _xylo(net(), spikes(t=4, b=2, c=c_in))
    t = c.targets["xylo"]
    assert t["refused"] and t["error"] == "UnsupportedOp" and not c.equivalent
    assert "node '" in t["reason"] and "remedy:" in t["reason"], t["reason"]
    assert all(w in t["reason"] for w in words), t["reason"]


def test_synaptic_decays_exact_as_shifts_or_labelled():
    """RSynaptic with alpha = 1 - 2**-2 maps its decay exactly as a shift; beta = 0.8 is rounded to the nearest
    shift (dash 2, 0.75) and labelled not exact; either way the chip is bit-exact against the reference."""
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(16, 12), snn.RSynaptic(alpha=0.75, beta=0.8, linear_features=12, init_hidden=True),
                        nn.Linear(12, 4), snn.Synaptic(alpha=0.5, beta=0.5, init_hidden=True))
    t = _xylo(net, spikes(t=8, b=2, p=0.5)).targets["xylo"]
    h = t["quantization"]["hidden"]
    assert t["bit_exact"] and h["alpha_exact_as_shift"] and h["dash_syn"][0] == 2
    assert not h["beta_exact_as_shift"] and h["dash_mem"][0] == 2
    assert t["quantization"]["output"]["alpha_exact_as_shift"] and t["float_vs_fixed"]["approximate"]
    why = " ".join(t["float_vs_fixed"]["why_not_exact"])
    assert "not 1 - 2**-k" in why and "no synaptic state" not in why   # beta 0.8; both layers are Synaptic


def test_four_targets_in_one_compile():
    """(NIR refuses snnTorch's RLeaky by name, so this network's hidden layer is a Leaky.)"""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 6), snn.Leaky(beta=0.875, init_hidden=True),
                        nn.Linear(6, 3), snn.Leaky(beta=0.75, init_hidden=True))
    c = _xylo(net, spikes(t=4, b=1), targets="lava,xylo,nir,onnx")
    assert list(c.targets) == ["lava", "xylo", "nir", "onnx"] and c.equivalent
    assert c.targets["xylo"]["bit_exact"] and not c.targets["xylo"].get("refused")
    assert all(c.targets[n].get("emitted", True) is not False for n in c.targets), c.targets


@pytest.mark.parametrize("seed", [3, 4, 11])   # RLeaky, RSynaptic, Leaky hidden layers
def test_random_networks_not_in_the_repository_stay_bit_exact(seed):
    """Random sizes, decays (dyadic or not), neuron kinds and weight scales: XyloSim and the reference agree bit
    for bit whatever the float agreement; the decays are labelled exact exactly when beta = 1 - 2**-k."""
    g = np.random.default_rng(seed)
    c_in, hidden, out = int(g.integers(2, 17)), int(g.integers(4, 40)), int(g.integers(1, 9))
    beta_h, beta_o = float(g.choice([0.5, 0.9375, 0.83, 0.6])), float(g.choice([0.75, 0.7]))
    torch.manual_seed(seed)
    layer = [snn.RLeaky(beta=beta_h, linear_features=hidden, init_hidden=True),
             snn.RSynaptic(alpha=0.875, beta=beta_h, linear_features=hidden, init_hidden=True),
             snn.Leaky(beta=beta_h, init_hidden=True)][seed % 3]
    net = nn.Sequential(nn.Linear(c_in, hidden), layer, nn.Linear(hidden, out),
                        snn.Leaky(beta=beta_o, init_hidden=True))
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(float(g.uniform(1, 4)))
    t = _xylo(net, spikes(t=10, b=2, c=c_in, p=0.4, seed=seed)).targets["xylo"]
    assert t["bit_exact"] and t["values_compared"] > 0, t.get("first_mismatches")
    q = t["quantization"]
    assert q["hidden"]["beta_exact_as_shift"] == (beta_h in (0.5, 0.9375))
    assert q["output"]["beta_exact_as_shift"] == (beta_o == 0.75)
    assert t["float_vs_fixed"]["approximate"] is True


def test_other_chips_through_the_target_option():
    """Xylo Audio 3 takes 20 outputs (Audio 2: 8), on Rockpool's syns63300 XyloSim, bit-exact; Xylo IMU refuses
    200 hidden neurons fed by the input (its input expansion is 128) with the numbers."""
    from spikec.targets.xylo import xylo_target
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(16, 24), snn.RLeaky(beta=0.875, linear_features=24, init_hidden=True),
                        nn.Linear(24, 20), snn.Leaky(beta=0.75, init_hidden=True))
    x = spikes(t=6, b=2)
    graph = spikec.compile(net, x, targets="none").graph
    trace = run(graph, x)
    a3 = xylo_target(graph, x, trace, {"xylo_chip": "xylo-audio-3"})
    assert a3.ok and a3.report["bit_exact"] and "syns63300" in a3.report["simulator"]
    assert a3.report["resources"]["output_neurons"] == {"used": 20, "of": 32}
    assert _xylo(net, x).targets["xylo"]["refused"]                         # Audio 2: 20 > 8 outputs
    wide = nn.Sequential(nn.Linear(16, 200), snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(200, 4),
                         snn.Leaky(beta=0.5, init_hidden=True))
    graph = spikec.compile(wide, x, targets="none").graph
    with pytest.raises(UnsupportedOp, match="200 hidden neurons receive input: Xylo IMU .* allows 128"):
        xylo_target(graph, x, run(graph, x), {"xylo_chip": "xylo-imu"})


def test_spikec_verify_runs_the_xylo_verifier(kws_out, tmp_path, monkeypatch):
    """``spikec verify`` re-checks each target whose artifact (``spikec.app.verify.ARTIFACTS``) OUTDIR holds:
    ``xylo/spec.npz`` is one, so this target's verifier runs, and a tampered spec fails the command."""
    from spikec.app import verify as verify_module
    assert verify_module.ARTIFACTS["xylo"] == SPEC_FILE
    result = CliRunner().invoke(main, ["verify", str(kws_out)])
    assert result.exit_code == 0 and "target_xylo" in result.output, result.output
    bad = tmp_path / "bad"
    shutil.copytree(kws_out, bad)
    spec = dict(np.load(bad / SPEC_FILE))
    spec["weights_in"] = -spec["weights_in"]
    np.savez(bad / SPEC_FILE, **spec)
    result = CliRunner().invoke(main, ["verify", str(bad)])
    failed = [line for line in result.output.splitlines() if "FAIL" in line or "not equivalent" in line]
    assert result.exit_code == 1 and any("target_xylo" in line for line in failed), result.output
