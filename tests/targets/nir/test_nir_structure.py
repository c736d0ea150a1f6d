"""Reshapes in the NIR export (``spikec/targets/nir/structure.py``): a Conv1d network (SpikingJelly's
``layer.Conv1d``: a (1, k) conv2d between two reshapes in the IR) is one NIR ``Conv1d``, exact in spikec's
interpreter; a reshape to a vector is a ``Flatten``; any other reshape is refused naming the shapes."""
import numpy as np
import pytest

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.nir import export as nir_export

pytest.importorskip("spikingjelly.activation_based")

MODELS = '''
import torch
from spikingjelly.activation_based import layer, neuron
from torch import nn


def conv1d(groups=1):
    torch.manual_seed(0)
    return nn.Sequential(layer.Conv1d(2, 4, 3, padding=1, groups=groups, step_mode="m"), neuron.IFNode(v_threshold=0.3, step_mode="m"),
                         layer.Flatten(step_mode="m"), layer.Linear(4 * 8, 5, step_mode="m"),
                         neuron.LIFNode(v_threshold=0.2, step_mode="m"))


def grouped(): return conv1d(groups=2)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("nir_structure")
    (d / "models.py").write_text(MODELS)
    np.savez(d / "x.npz", input=np.random.default_rng(0).random((20, 3, 2, 8)) * 8)
    return d


@pytest.mark.parametrize("factory", ["conv1d", "grouped"])
def test_a_conv1d_network_is_a_nir_conv1d(models, factory):
    from spikec.app.driver import CompileOptions, compile_model
    c = compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / "x.npz"),
                                     stepping="multistep", target="nir"))
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert t["nodes"]["Conv1d"] == 1 and "Conv2d" not in t["nodes"]
    assert t["interpreter"][t["scheme"]]["spikes_compared"] > 0
    assert c.io["output"].any() and not c.io["output"].all()
    # the consumers' limits name the node they lack (snnTorch and Norse read no Conv1d)
    assert "(Conv1d): import_from_nir has no mapping" in t["consumers"]["snntorch"]["reason"]
    assert "(Conv1d): from_nir has no mapping" in t["consumers"]["norse"]["reason"]


def _graph(shape_in, shape_out):
    x = Node("x", "input", (), TensorType(shape_in, "binary"))
    r = Node("r", "reshape", ("x",), TensorType(shape_out, "binary"), {"shape": shape_out})
    return Graph([x, r], ["r"])


def test_a_reshape_to_a_vector_is_a_flatten():
    ex = nir_export.export(_graph((2, 3, 4), (24,)))
    kinds = {type(n).__name__ for n in ex.graph.nodes.values()}
    assert "Flatten" in kinds


def test_another_reshape_is_refused_naming_the_shapes():
    with pytest.raises(UnsupportedOp) as e:
        nir_export.export(_graph((2, 12), (4, 6)))
    assert "(2, 12) -> (4, 6)" in e.value.what and "node 'r' (reshape)" in e.value.where
