"""The four framework example networks (examples/frameworks) on the Lava target, trained a few steps with the
framework's surrogate gradients and compiled from their checkpoints as ``tests/app/test_bring_your_model.py`` does:
bit-exact against the integer reference, with what each needed: a real static input as 8-bit graded spikes
(snnTorch loop), max pooling of real values on host partitions and ``mem`` recorded as an output (snnTorch step),
SpikingJelly's multistep CSNN, and Norse's ``LICell`` read-out recorded every step (Norse step).
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
pytest.importorskip("snntorch")
pytest.importorskip("spikingjelly.activation_based")
pytest.importorskip("norse.torch")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "frameworks"


def _images(rng, shape):
    return (rng.random(shape) < 0.4).astype(np.float64)


CASES = {  # name: (file, factory, --stepping, inputs)
    "snntorch-loop": ("snntorch_loop.py", "net", "loop", lambda r: r.random((3, 64)) * 2.0),
    "snntorch-step": ("snntorch_step.py", "net", "step", lambda r: _images(r, (6, 3, 1, 12, 12))),
    "spikingjelly-multistep": ("spikingjelly_csnn.py", "multistep", "multistep", lambda r: _images(r, (6, 3, 1, 12, 12))),
    "norse-step": ("norse_step.py", "net", "step", lambda r: _images(r, (8, 3, 32))),
}


def _load(file, factory):
    spec = importlib.util.spec_from_file_location(f"lava_example_{file[:-3]}", EXAMPLES / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, factory)()


def _train(model, stepping, x, steps=2):
    """A few Adam steps on the model's first output, stepped the framework's way (the checkpoint is trained)."""
    import snntorch
    import snntorch.utils
    from spikingjelly.activation_based import functional
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    xt = torch.as_tensor(x, dtype=torch.float32)

    def run():
        if stepping == "loop":
            return model(xt)[0]
        if stepping == "multistep":
            functional.reset_net(model)
            return model(xt)
        if hasattr(model, "forward_state") or type(model).__name__ == "SequentialState":
            state, outs = None, []
            for x_t in xt:
                y, state = model(x_t, state)
                outs.append(y)
            return torch.stack(outs)
        # utils.reset walks every neuron instance of the process (a class-level list): keep this model's only,
        # so other tests' neurons (some with their state deleted) cannot break the framework's own reset
        snntorch.SpikingNeuron.instances[:] = [n for n in snntorch.SpikingNeuron.instances
                                               if any(n is m for m in model.modules())]
        snntorch.utils.reset(model)
        outs = [model(x_t) for x_t in xt]
        return torch.stack([o[0] if isinstance(o, tuple) else o for o in outs])
    for _ in range(steps):
        opt.zero_grad()
        loss = ((run().float().mean(0) - 0.5) ** 2).mean()
        loss.backward()
        opt.step()
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_framework_example_is_bit_exact_in_lava(name, tmp_path):
    from spikec.app.driver import CompileOptions, compile_model
    file, factory, stepping, make = CASES[name]
    x = make(np.random.default_rng(0))
    model = _train(_load(file, factory), stepping, x)
    torch.save(model.state_dict(), tmp_path / "ckpt.pt")
    np.savez(tmp_path / "x.npz", input=x)
    c = compile_model(CompileOptions(f"{EXAMPLES / file}:{factory}", weights=str(tmp_path / "ckpt.pt"),
                                     inputs=str(tmp_path / "x.npz"), stepping=stepping, target="lava"))
    t = c.report["target"]
    assert c.report["equivalent"]
    assert t["bit_exact"], t["first_mismatches"]
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    assert set(t["float_vs_fixed"]["outputs"]) == set(c.graph.outputs)
    if name == "snntorch-loop":   # the static real image: 8-bit graded spikes, its quantization error reported
        q = t["quantization"]["calibration"]["input_quantization"]["input"]
        assert 0 < q["max_abs_error"] <= 0.5 / q["gain"] + 1e-12
        assert t["state_reads_compared"] > 0
    if name == "snntorch-step":   # Conv2d -> MaxPool2d (real) -> Leaky: the max pools on chip as max trees
        assert t["partitions"]["host"] == [] and sum(p["type"] == "Delta" for p in t["processes"]) == 2
        assert t["state_reads_compared"] > 0
    if name == "norse-step":      # the LICell read-out: its v recorded every step
        assert t["state_reads_compared"] > 0 and "state_max_rel_error" in t["float_vs_fixed"]["outputs"]["model.3"]
