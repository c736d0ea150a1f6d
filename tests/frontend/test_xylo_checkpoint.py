"""spikec.nn.xylo buffers as a checkpoint loads them: load_state_dict writes past the modules' own checks, so the
converter checks again and names the module (a threshold of 0.5 would silently become 0 on the chip)."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.ir.errors import UnsupportedOp
from spikec.nn import xylo


def net():
    torch.manual_seed(0)
    return nn.Sequential(xylo.Hidden(6, 5, dash_mem=3, dash_syn=2, threshold=50), xylo.Output(5, 2))


X = (np.random.default_rng(0).random((6, 2, 6)) < 0.4).astype(np.float64)


@pytest.mark.parametrize("key, value, said", [("threshold", 0.5, "must be integers"),
                                              ("dash_mem", 20.0, "must lie in [0, 15]")])
def test_a_loaded_value_out_of_range_is_named(key, value, said):
    model = net()
    state = model.state_dict()
    state[f"0.{key}"] = torch.full_like(state[f"0.{key}"], value)
    model.load_state_dict(state)
    with pytest.raises(UnsupportedOp, match=said.replace("[", r"\[").replace("]", r"\]")) as e:
        spikec.compile(model, X, targets="none")
    assert "module '0'" in str(e.value.where) and key in e.value.remedy


def test_the_modules_own_values_compile():
    assert spikec.compile(net(), X, targets="none").equivalent
