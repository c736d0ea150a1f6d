"""Bring your model: snnTorch, SpikingJelly and Norse networks as their users write them (examples/frameworks),
trained a few steps with the framework's own surrogate gradients, compiled unchanged from their files and
``state_dict`` checkpoints with ``spikec compile FILE:factory --weights CKPT --inputs X.npz --stepping S``.

Each case checks: the compile is equivalent; every output recorded in io.npz equals the framework's own forward
(stepped the framework's way, written out here, run in float64); ``spikec verify`` passes; ``--stepping auto``
finds the same convention; the report names the convention and the source precision.
"""
import importlib.util
import json

import numpy as np
import pytest
import torch

from app_helpers import REPO, cli

snntorch = pytest.importorskip("snntorch")
snntorch_utils = pytest.importorskip("snntorch.utils")
sj_functional = pytest.importorskip("spikingjelly.activation_based.functional")
norse = pytest.importorskip("norse.torch")

EXAMPLES = REPO / "examples" / "frameworks"


def load(file, factory):
    spec = importlib.util.spec_from_file_location(f"example_{file[:-3]}", EXAMPLES / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, factory)()


def _cast_hooks(model):
    """snnTorch hands float32 spikes to the next layer: in float64 they are cast (exactly) to the layer's dtype."""
    for m in model.modules():
        params = list(m.parameters(recurse=False))
        if params:
            m.register_forward_pre_hook(lambda mod, a, p=params[0]: tuple(v.to(p.dtype) for v in a))


# -- each framework's own way to run its model on [T, B, ...] (or a static [B, ...]) ----------------------
def run_multistep(model, x):
    sj_functional.reset_net(model)
    out = model(x)
    return out if isinstance(out, tuple) else (out,)


def run_snntorch_steps(model, x):
    # utils.reset walks every neuron instance of the process (a class-level list): keep this model's only,
    # so other tests' neurons (some with their state deleted) cannot break the framework's own reset
    snntorch.SpikingNeuron.instances[:] = [m for m in snntorch.SpikingNeuron.instances
                                           if any(m is n for n in model.modules())]
    snntorch_utils.reset(model)
    outs = [model(x_t) for x_t in x]
    outs = [o if isinstance(o, tuple) else (o,) for o in outs]
    return tuple(torch.stack([o[i] for o in outs]) for i in range(len(outs[0])))


def run_sj_steps(model, x):
    sj_functional.reset_net(model)
    return (torch.stack([model(x_t) for x_t in x]),)


def run_norse_steps(model, x):
    state, outs = None, []
    for x_t in x:
        y, state = model(x_t, state)
        outs.append(y)
    return (torch.stack(outs),)


def run_loop(model, x):
    out = model(x)
    return out if isinstance(out, tuple) else (out,)


def run_sj_loop(model, x):
    sj_functional.reset_net(model)
    return (model(x),)


def images(rng, shape):
    return (rng.random(shape) < 0.4).astype(np.float64)


CASES = {  # name: (file, factory, --stepping, inputs(rng), the framework's run)
    "snntorch-loop": ("snntorch_loop.py", "net", "loop", lambda r: r.random((6, 64)) * 2.0, run_loop),
    "snntorch-step": ("snntorch_step.py", "net", "step", lambda r: images(r, (8, 4, 1, 12, 12)), run_snntorch_steps),
    "spikingjelly-multistep": ("spikingjelly_csnn.py", "multistep", "multistep", lambda r: images(r, (6, 4, 1, 12, 12)),
                               run_multistep),
    "spikingjelly-step": ("spikingjelly_csnn.py", "single_step", "step", lambda r: images(r, (6, 4, 1, 12, 12)),
                          run_sj_steps),
    "norse-step": ("norse_step.py", "net", "step", lambda r: images(r, (10, 4, 32)), run_norse_steps),
    "norse-multistep": ("norse_multistep.py", "net", "multistep", lambda r: r.random((6, 4, 1, 8, 8)), run_multistep),
    "norse-loop": ("norse_loop.py", "net", "loop", lambda r: images(r, (8, 4, 32)), run_loop),
    "spikingjelly-loop": ("spikingjelly_loop.py", "net", "loop", lambda r: images(r, (8, 4, 32)), run_sj_loop),
}


def train(model, run, x, steps=4):
    """A few Adam steps through the framework's surrogate gradients: the checkpoint is framework-trained."""
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    xt = torch.as_tensor(x, dtype=torch.float32)
    target = torch.full_like(run(model, xt)[0][-1].detach().float(), 0.5)
    for _ in range(steps):
        opt.zero_grad()
        out = run(model, xt)[0].float()
        loss = ((out.mean(0) - target) ** 2).mean()
        loss.backward()
        opt.step()
    return model


@pytest.fixture(scope="module", params=list(CASES))
def compiled(request, tmp_path_factory):
    name = request.param
    file, factory, stepping, make_inputs, run = CASES[name]
    work = tmp_path_factory.mktemp(name)
    x = make_inputs(np.random.default_rng(0))
    model = train(load(file, factory), run, x)
    torch.save(model.state_dict(), work / "ckpt.pt")
    np.savez(work / "x.npz", input=x)
    res = cli("compile", f"{EXAMPLES / file}:{factory}", "--weights", work / "ckpt.pt", "--inputs", work / "x.npz",
              "--stepping", stepping, "-o", work / "out")
    return name, work, res


def test_compiles_equivalent_and_records_what_the_framework_computes(compiled):
    name, work, res = compiled
    file, factory, stepping, _, run = CASES[name]
    assert res.exit_code == 0, res.output
    report = json.loads((work / "out" / "report.json").read_text())
    assert report["equivalent"] and report["frontend"]["stepping"] == stepping
    assert report["source_precision"]["dtype"] == "float32" and "error" not in report["source_precision"]
    model = load(file, factory)
    model.load_state_dict(torch.load(work / "ckpt.pt"))
    model.double().eval()
    _cast_hooks(model)
    x = np.load(work / "x.npz")["input"]
    with torch.no_grad():
        want = [o.double().numpy() for o in run(model, torch.as_tensor(x))]
    io = np.load(work / "out" / "io.npz")
    got = [io[k] for k in sorted(k for k in io.files if k.startswith("output"))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.array_equal(g[:, :w.shape[1]], w)  # the compile appends probe samples after the user's
    spikes = [g for g in got if np.isin(g, (0.0, 1.0)).all()]
    assert all(0 < s.sum() for s in spikes) or not spikes, "a spike output never fires: the check shows nothing"


def test_verify_passes(compiled):
    _, work, res = compiled
    assert res.exit_code == 0, res.output
    check = cli("verify", work / "out", "--run-source")
    assert check.exit_code == 0, check.output


def test_auto_finds_the_same_convention(compiled):
    name, work, res = compiled
    file, factory, stepping, _, _ = CASES[name]
    auto = cli("compile", f"{EXAMPLES / file}:{factory}", "--weights", work / "ckpt.pt", "--inputs", work / "x.npz",
               "-o", work / "auto", "--passes", "none", "--no-probes")
    assert auto.exit_code == 0, auto.output
    assert json.loads((work / "auto" / "report.json").read_text())["frontend"]["stepping"] == stepping


def test_a_lava_ready_spikingjelly_network_is_bit_exact_on_lava(tmp_path):
    model = load("spikingjelly_csnn.py", "lava_ready")
    x = images(np.random.default_rng(1), (6, 4, 1, 12, 12))
    train(model, run_multistep, x)
    torch.save(model.state_dict(), tmp_path / "ckpt.pt")
    np.savez(tmp_path / "x.npz", input=x)
    res = cli("compile", f"{EXAMPLES / 'spikingjelly_csnn.py'}:lava_ready", "--weights", tmp_path / "ckpt.pt",
              "--inputs", tmp_path / "x.npz", "--target", "lava", "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["equivalent"] and report["target"]["bit_exact"]


def test_a_silent_layer_is_warned_by_name_and_strict_exits_1(tmp_path):
    model = load("spikingjelly_csnn.py", "multistep")
    with torch.no_grad():
        model[9].weight.zero_()  # the classifier can never reach its threshold
        model[9].bias.fill_(-1.0)
    torch.save(model.state_dict(), tmp_path / "ckpt.pt")
    np.savez(tmp_path / "x.npz", input=images(np.random.default_rng(2), (4, 2, 1, 12, 12)))
    args = ["compile", f"{EXAMPLES / 'spikingjelly_csnn.py'}:multistep", "--weights", tmp_path / "ckpt.pt",
            "--inputs", tmp_path / "x.npz"]
    res = cli(*args, "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert "warning: 10: neuron '10'" in res.output and "never spikes" in res.output
    strict = cli(*args, "-o", tmp_path / "strict", "--strict")
    assert strict.exit_code == 1 and "--strict" in strict.output


@pytest.mark.parametrize("name", ["spikingjelly-step", "norse-multistep", "norse-loop", "spikingjelly-loop"])
def test_the_trained_checkpoint_is_bit_exact_on_lava(name, tmp_path):
    file, factory, stepping, make_inputs, run = CASES[name]
    x = make_inputs(np.random.default_rng(0))
    model = train(load(file, factory), run, x)
    torch.save(model.state_dict(), tmp_path / "ckpt.pt")
    np.savez(tmp_path / "x.npz", input=x)
    res = cli("compile", f"{EXAMPLES / file}:{factory}", "--weights", tmp_path / "ckpt.pt", "--inputs",
              tmp_path / "x.npz", "--stepping", stepping, "--target", "lava", "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["equivalent"] and report["target"]["bit_exact"]
