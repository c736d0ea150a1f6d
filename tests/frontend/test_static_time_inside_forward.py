"""SpikingJelly's CSNN tutorial makes its time steps inside forward (``x.unsqueeze(0).repeat(T, 1, 1, 1, 1)``).

When that repeat is the first thing forward does to its input (``unsqueeze(0)`` or ``x[None]``, then
``.repeat(T, 1, ..., 1)`` or ``.expand(T, -1, ..., -1)`` with a constant T), the model is taken as a static-input
model (``--stepping loop``, a ``[B, ...]`` input repeated over the model's own T): traced as the multi-step graph
after the repeat, run as the model itself on the static input, and proved against it. Anything else that adds a
time dim inside forward is refused by name with the remedy. Checked against SpikingJelly's own modules.
"""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.frontend.loop import repeated_body
from spikec.frontend.tracing import fx_trace
from spikec.ir.errors import UnsupportedOp

sj = pytest.importorskip("spikingjelly.activation_based")
from spikingjelly.activation_based import functional, layer, neuron, surrogate  # noqa: E402


class CSNN(nn.Module):
    """The tutorial's shape (conv_fashion_mnist.py), small: conv-BN-IF-pool twice, flatten, linear, IF; mean rate."""

    def __init__(self, how="repeat", T=4):
        super().__init__()
        torch.manual_seed(0)
        self.T, self.how = T, how
        self.conv_fc = nn.Sequential(
            layer.Conv2d(1, 4, 3, padding=1, bias=False), layer.BatchNorm2d(4),
            neuron.IFNode(surrogate_function=surrogate.ATan()), layer.MaxPool2d(2, 2),
            layer.Flatten(), layer.Linear(4 * 4 * 4, 5, bias=False), neuron.IFNode(surrogate_function=surrogate.ATan()))
        functional.set_step_mode(self, step_mode="m")
        with torch.no_grad():   # positive drive and real batch statistics: both layers fire
            for p in self.conv_fc.parameters():
                p.abs_().mul_(2)
            self.conv_fc[1].running_mean.uniform_(-0.2, 0.2)
            self.conv_fc[1].running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        if self.how == "repeat":
            x_seq = x.unsqueeze(0).repeat(self.T, 1, 1, 1, 1)
        elif self.how == "expand":
            x_seq = x[None].expand(self.T, -1, -1, -1, -1)
        elif self.how == "scaled first":   # the input is changed before it is repeated
            x_seq = (x * 2).unsqueeze(0).repeat(self.T, 1, 1, 1, 1)
        elif self.how == "batch repeated":   # repeats the batch too: not a time dim made from one input
            x_seq = x.unsqueeze(0).repeat(self.T, 2, 1, 1, 1)
        else:
            x_seq = x
        return self.conv_fc(x_seq).mean(0)


def _sj(model, x):
    functional.reset_net(model)
    with torch.no_grad():
        out = model.double()(torch.as_tensor(x)).numpy()
    functional.reset_net(model)
    return out


@pytest.mark.parametrize("how", ["repeat", "expand"])
def test_time_made_from_the_input_compiles_and_equals_spikingjelly(how):
    x = np.random.default_rng(0).random((3, 1, 8, 8)) * 2
    model = CSNN(how).eval()
    c = spikec.compile(model, x, input_shape=(1, 8, 8), stepping="loop", targets="onnx")  # [B, *input_shape]
    assert c.equivalent and c.targets["onnx"]["spike_exact"]
    r = c.report
    assert r["frontend"]["stepping"] == "loop" and r["frontend"]["static_input"] is True
    assert r["input"]["steps"] == 4
    want = _sj(CSNN(how).eval(), x)
    assert want.sum() > 0   # the proof compares firing, not silence
    np.testing.assert_allclose(c.run(x), want, rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_the_tutorials_static_batch_compiles_as_given_with_no_options():
    """The tutorial's own call, ``net(img)`` on a ``[B, C, H, W]`` batch: the file alone, no --input-shape, no
    --stepping. Inputs that change over their first dim are no repeated step, so they are the static batch."""
    x = np.random.default_rng(1).random((3, 1, 8, 8)) * 2
    c = spikec.compile(CSNN("expand").eval(), x, targets=())
    r = c.report
    assert c.equivalent and r["frontend"]["static_input"] is True
    assert (r["input"]["steps"], r["input"]["samples"], r["input"]["shape"]) == (4, 3, [1, 8, 8])
    np.testing.assert_allclose(c.run(x), _sj(CSNN("expand").eval(), x), rtol=1e-12, atol=1e-15)


def test_the_model_own_T_is_the_steps_of_random_inputs_whatever_the_option():
    c = spikec.compile(CSNN(T=6).eval(), input_shape=(1, 8, 8), steps=3, targets=())
    assert c.equivalent and c.report["input"]["steps"] == 6 and c.report["frontend"]["static_input"] is True


def test_the_repeat_is_taken_out_of_the_graph():
    """Before/after: the forward's fx graph has the unsqueeze and the repeat; the body has neither, and its input
    feeds the first layer directly."""
    root, body, steps = repeated_body(CSNN().eval(), fx_trace)
    assert steps == 4
    ops = [(n.op, n.target) for n in body.nodes]
    assert ("call_method", "unsqueeze") not in ops and ("call_method", "repeat") not in ops
    (x,) = [n for n in body.nodes if n.op == "placeholder"]
    assert [u.target for u in x.users] == ["conv_fc.0"]


@pytest.mark.parametrize("how", ["scaled first", "batch repeated"])
def test_time_made_otherwise_inside_forward_is_refused_with_the_remedy(how):
    assert repeated_body(CSNN(how).eval(), fx_trace) is None
    with pytest.raises(UnsupportedOp) as e:   # random inputs, --stepping auto: as the CLI's --input-shape runs it
        spikec.compile(CSNN(how).eval(), input_shape=(1, 8, 8), targets=())
    assert "makes the time steps from one static input" in str(e.value), e.value
    assert "repeat the model's input itself" in e.value.remedy and "repeat outside the model" in e.value.remedy


def test_a_multistep_model_is_not_taken_as_repeated():
    assert repeated_body(CSNN("none").eval(), fx_trace) is None


def test_the_remedy_of_repeating_outside_still_compiles_and_equals_spikingjelly():
    x = np.random.default_rng(0).random((3, 1, 8, 8)) * 2
    outside = CSNN("none").eval()
    c = spikec.compile(outside, np.repeat(x[None], 4, 0), stepping="multistep", targets=())
    assert c.equivalent
    np.testing.assert_allclose(c.run(np.repeat(x[None], 4, 0)), _sj(CSNN().eval(), x), rtol=1e-12, atol=1e-15)


def test_inputs_changing_over_time_given_to_a_model_reading_no_step_are_refused():
    """A loop model that reads no x[step] (it applies its layer to the whole input every step) given [T, B, ...]
    inputs that change over T: refused as before, not silently read as a static batch of T samples."""
    class NoStep(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            rec = []
            for _ in range(5):
                rec.append(torch.relu(self.fc(x)))
            return torch.stack(rec)

    x = np.random.default_rng(0).random((6, 2, 4))
    with pytest.raises(UnsupportedOp, match="reads no x\\[step\\]"):
        spikec.compile(NoStep(), x, stepping="loop", targets=())
