"""Norse's ``Lift(module)`` (a per-step module applied over time, as Norse's docs write a conv SNN) is converted
like ``spikec.nn.TimeDistributed``, and the compile equals Norse's own forward; a lifted cell is refused by name."""
import numpy as np
import pytest
import torch

import spikec
from spikec.ir.errors import UnsupportedOp

norse = pytest.importorskip("norse.torch")


def conv_net():
    torch.manual_seed(0)
    net = norse.SequentialState(
        norse.Lift(torch.nn.Conv2d(1, 4, 3)), norse.LIF(norse.LIFParameters(v_th=torch.tensor(0.3))),
        norse.Lift(torch.nn.Flatten()), norse.Lift(torch.nn.Linear(4 * 5 * 5, 3)), norse.LI())
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()   # positive drive: the LIF layer fires
    return net.eval()


def test_lifted_layers_compile_and_equal_norse():
    net = conv_net()
    x = (np.random.default_rng(0).random((10, 2, 1, 7, 7)) < 0.5).astype(np.float64)
    c = spikec.compile(net, x, stepping="multistep", targets=("onnx",))
    assert c.equivalent
    fresh = (np.random.default_rng(1).random((10, 3, 1, 7, 7)) < 0.5).astype(np.float64)
    with torch.no_grad():
        want, _ = net.double()(torch.as_tensor(fresh))
    spikes = [n for n in c.graph.nodes if n.op == "lif_norse"]
    assert spikes and np.abs(want.numpy()).sum() > 0
    np.testing.assert_allclose(c.run(fresh), want.numpy(), rtol=1e-12, atol=1e-12)


def test_a_lifted_cell_is_refused_with_the_multistep_module_as_remedy():
    net = norse.SequentialState(norse.Lift(torch.nn.Linear(4, 3)), norse.Lift(norse.LIFCell()))
    with pytest.raises(UnsupportedOp, match="Lift of the stateful module LIFCell") as e:
        spikec.compile(net.eval(), np.ones((4, 2, 4)), stepping="multistep", targets=())
    assert "LIF()" in str(e.value)
