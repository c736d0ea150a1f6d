"""spikec.nn.xylo: each population's forward against Rockpool's XyloSim (xylosim.v2) and spikec's reference on
random integers driven into saturation; gradients flow and a briefly trained network fires; compiled with
``--target xylo`` it is bit-exact against its own forward (``bit_exact_vs_source``) and against XyloSim."""
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

from spikec.nn import xylo

pytest.importorskip("xylosim.v2")
pytest.importorskip("rockpool")

import spikec  # noqa: E402
from spikec.app.cli import main  # noqa: E402
from spikec.ir.errors import BadInput, UnsupportedOp  # noqa: E402
from spikec.targets.xylo import build as xylo_build, exact, reference, simulate, verify_outdir  # noqa: E402
from spikec.targets.xylo.limits import XYLO_AUDIO_2  # noqa: E402


def _net(seed=0, c=16, n=24, m=4, scale=60.0, shift=0, **hidden):
    torch.manual_seed(seed)
    kw = dict(dash_mem=3, dash_syn=2, threshold=200, init_scale=scale, weight_shift=shift)
    return nn.Sequential(xylo.Hidden(c, n, recurrent=True, **{**kw, **hidden}),
                         xylo.Output(n, m, dash_mem=2, dash_syn=1, threshold=100, init_scale=scale))


def _counts(t=20, b=3, c=16, p=0.3, seed=0, top=1):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, top + 1, (t, b, c))
                            * (np.random.default_rng(seed + 1).random((t, b, c)) < p)).double()


def _graph(net, x):
    return spikec.compile(net.double(), x.numpy(), targets="none").graph


@pytest.mark.parametrize("seed,shift,top", [(0, 0, 1), (1, 7, 3), (2, 5, 15)])
def test_forward_is_xylosim_and_the_reference_into_saturation(seed, shift, top):
    """Shift 7 and up to 15 events a step saturate the 16-bit current after single sources: the module's states equal
    XyloSim's and the reference's at every step (the source's output one step late is the chip's)."""
    net = _net(seed, shift=shift, scale=400.0 if shift == 7 else 60.0, bias=float(seed * 300 - 300), threshold=[150 + 10 * i for i in range(24)]).double()
    x = _counts(seed=seed, top=top, p=0.5)
    graph = _graph(net, x)
    spec = exact.spec_of(graph, XYLO_AUDIO_2)
    src = exact.source_runs(graph, x.numpy())
    rasters = simulate.raster(x.numpy(), 16, "input")
    chip = simulate.xylosim_runs(spec, rasters)
    vs = exact.vs_source(chip, src)
    assert vs["bit_exact_vs_source"], vs["first_mismatches_vs_source"]
    assert simulate.compare_runs(chip, simulate.reference_runs(spec, rasters))["bit_exact"]
    isyn = np.stack([r["isyn"] for r in src])
    if shift == 7:
        # it saturated: 32767 (or -32768) less its decay (dash_syn 2) is the largest current there is
        assert np.abs(isyn).max() == reference.STATE_MAX + 1 - (reference.STATE_MAX + 1) // 4
    s = net[0](x)
    assert torch.equal(s, torch.from_numpy(np.stack([r["spikes"] for r in src], 1)))      # the module itself


def test_more_than_15_input_events_a_step_are_refused_by_name():
    """XyloSim takes 16 events in one step as 15 (Rockpool: 'Up to 15 input events can be sent per bin')."""
    net = _net(2)
    with pytest.raises(BadInput, match="carries 16 events in one step; Xylo takes at most 15"):
        spikec.compile(net.double(), _counts(t=4, b=1, seed=2, top=16, p=1.0).numpy(), targets="xylo")


def test_float32_forward_equals_float64():
    net = _net(3)
    x = _counts(seed=3)
    assert torch.equal(net(x.float()).double(), net.double()(x))


def test_gradients_flow_and_brief_training_fires_every_layer():
    torch.manual_seed(0)
    net = _net(4, scale=20.0)
    x = _counts(t=25, b=8, seed=4).float()
    target = torch.tensor([3.0, 0.0, 2.0, 1.0])
    losses = _train_briefly(net, x, target)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())
    assert losses[-1] < losses[0]
    hidden = net[0](x)
    assert hidden.sum() > 0 and net(x).sum() > 0 and hidden.max() <= 31 and net(x).max() <= 1


def _train_briefly(net, x, target, steps=15):
    opt = torch.optim.Adam(net.parameters(), lr=2.0)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = (net(x).sum(0).mean(0) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_compiles_bit_exact_vs_source_and_xylosim_through_the_cli(tmp_path):
    """A briefly trained network (its loss falls, both layers fire) compiled by the CLI with --target xylo."""
    net = _net(5, scale=20.0)
    x = _counts(t=25, b=8, seed=5).float()
    losses = _train_briefly(net, x, torch.tensor([3.0, 0.0, 2.0, 1.0]))
    assert losses[-1] < losses[0] and net[0](x).sum() > 0 and net(x).sum() > 0
    torch.save(net.state_dict(), tmp_path / "w.pt")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torch import nn\nfrom spikec.nn import xylo\n\n"
        "def model():\n    torch.manual_seed(5)\n"
        "    net = nn.Sequential(xylo.Hidden(16, 24, recurrent=True, dash_mem=3, dash_syn=2, threshold=200),\n"
        "                        xylo.Output(24, 4, dash_mem=2, dash_syn=1, threshold=100))\n"
        f"    net.load_state_dict(torch.load({str(tmp_path / 'w.pt')!r}))\n    return net\n")
    np.savez(tmp_path / "x.npz", input=_counts(seed=5).numpy().astype(np.float32))
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["compile", f"{tmp_path / 'model.py'}:model", "--inputs", str(tmp_path / "x.npz"),
                                  "-o", str(out), "--target", "xylo"])
    assert r.exit_code == 0, r.output
    t = json.loads((out / "report.json").read_text())["target"]
    assert t["bit_exact"] and t["bit_exact_vs_source"] and t["exact_source"] and t["values_compared_vs_source"] > 0
    assert t["quantization"] == {"none": "every population is a spikec.nn.xylo module: its integers as they are"}
    from spikec.core.serialize import load_graph
    graph = load_graph(out)
    x = np.load(out / "io.npz")["input"]          # the inputs the compile ran (its own samples included)
    v = verify_outdir(out, graph, x, None)
    assert v["equivalent"] and v["bit_exact_vs_source"] and v["rebuilt_xylosim_reproduces_io"]
    r = CliRunner().invoke(main, ["verify", str(out)])
    assert r.exit_code == 0 and "target_xylo" in r.output, r.output


def test_a_tampered_source_is_caught():
    """The chip against the source's forward: a bias changed in the graph after the spec was taken differs."""
    net = _net(6, bias=50.0).double()
    x = _counts(seed=6)
    graph = _graph(net, x)
    spec = exact.spec_of(graph, XYLO_AUDIO_2)
    spec["bias"] = spec["bias"] + 1
    chip = simulate.xylosim_runs(spec, simulate.raster(x.numpy(), 16, "input"))
    vs = exact.vs_source(chip, exact.source_runs(graph, x.numpy()))
    assert not vs["bit_exact_vs_source"] and any("vmem" in m for m in vs["first_mismatches_vs_source"])


def test_other_forms_and_limits_are_refused_by_name():
    torch.manual_seed(0)
    x = _counts(t=4, b=1, c=20)
    two = nn.Sequential(xylo.Hidden(20, 8), xylo.Output(8, 4))
    with pytest.raises(UnsupportedOp, match="20 inputs: Xylo Audio 2 .* has 16"):
        exact.spec_of(_graph(two, x), XYLO_AUDIO_2)
    deep = nn.Sequential(xylo.Hidden(16, 8), xylo.Hidden(8, 8), xylo.Output(8, 2))
    with pytest.raises(UnsupportedOp, match="one hidden population"):
        exact.spec_of(_graph(deep, _counts(t=4, b=1)), XYLO_AUDIO_2)
    c = spikec.compile(nn.Sequential(xylo.Hidden(16, 8), xylo.Output(8, 12)).double(), _counts(t=4, b=1).numpy(),
                       targets="xylo")
    assert c.targets["xylo"]["refused"] and "12 output neurons" in c.targets["xylo"]["reason"]
    mixed = nn.Sequential(xylo.Hidden(16, 8), nn.Linear(8, 8), xylo.Output(8, 2))
    with pytest.raises(UnsupportedOp, match="op 'linear' beside spikec.nn.xylo populations"):
        xylo_build(_graph(mixed, _counts(t=4, b=1)), _counts(t=4, b=1).numpy(), XYLO_AUDIO_2)


def test_module_arguments_are_validated():
    for kw, words in (({"dash_mem": 16}, "dash_mem must lie in"), ({"threshold": 0}, "threshold must lie in"),
                      ({"weight_shift": 8}, "weight_shift must be"), ({"dash_syn": 1.5}, "integers"),
                      ({"threshold": [1, 2]}, "one per neuron")):
        with pytest.raises(ValueError, match=words):
            xylo.Hidden(4, 3, **kw)
    with pytest.raises(ValueError, match=r"\[T, B, 4\]"):
        xylo.Hidden(4, 3)(torch.zeros(2, 1, 5))
    assert torch.equal(xylo.integer_weights(torch.tensor([300.0, -300.0, 1.5, -1.5]), 1),
                       torch.tensor([254.0, -256.0, 4.0, -2.0]))
