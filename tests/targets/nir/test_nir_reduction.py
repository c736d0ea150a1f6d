"""A per-step sum / mean that leaves one dim (global pooling over a step) exported to NIR as Flatten and an
Affine, checked by spikec's NIR interpreter and the consumers that can run the file (snnTorch, Norse), against
snnTorch's own modules; any other reduction is refused by name."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.core.interpreter import run
from spikec.ir.errors import UnsupportedOp
from spikec.targets.nir import nir_target

snntorch = pytest.importorskip("snntorch", reason="snnTorch 1.0.0 is a test dependency")


class Pooled(nn.Module):
    """conv -> Leaky -> mean (or sum) over H, W -> Linear -> Leaky: global average pooling of spikes."""

    def __init__(self, reduce="mean", dims=(-2, -1), keepdim=False):
        super().__init__()
        torch.manual_seed(1)
        self.conv = nn.Conv2d(2, 6, 3, padding=1)
        self.l1 = snntorch.Leaky(beta=torch.full((6, 5, 5), 0.9), threshold=torch.full((6, 5, 5), 0.5),
                                 init_hidden=True)
        self.fc = nn.Linear(6 if len(dims) == 2 else 30, 4)
        self.l2 = snntorch.Leaky(beta=torch.full((4,), 0.8), threshold=torch.full((4,), 0.05), init_hidden=True)
        self.reduce, self.dims, self.keepdim = reduce, dims, keepdim

    def forward(self, x):
        s = self.l1(self.conv(x))
        h = s.mean(self.dims, keepdim=self.keepdim) if self.reduce == "mean" else s.sum(self.dims)
        return self.l2(self.fc(h.flatten(1) if self.keepdim or len(self.dims) == 1 else h))


X = (np.random.default_rng(0).random((10, 3, 2, 5, 5)) < 0.5).astype(float)


@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_global_pooling_of_spikes_is_exported_and_every_runnable_consumer_matches(reduce):
    c = spikec.compile(Pooled(reduce).eval(), X, targets="nir")
    nir_report = c.targets["nir"]
    assert c.equivalent and nir_report["exact"], nir_report
    assert any("as Flatten and an Affine" in n for n in nir_report["notes"])
    ran = {k: v for k, v in nir_report["consumers"].items() if v["ran"]}
    assert {"snntorch", "norse"} <= set(ran), nir_report["consumers"]
    assert all(v["spike_exact"] and v["spike_count"] > 0 for v in ran.values()), ran


@pytest.mark.parametrize("kw, says", [({"keepdim": True}, "keepdim=True"), ({"dims": (-1,)}, "over dims (2,)")])
def test_a_reduction_that_keeps_more_than_one_dim_is_refused_by_name(kw, says):
    c = spikec.compile(Pooled(**kw).eval(), X, targets=())
    graph = c.graph
    with pytest.raises(UnsupportedOp) as e:
        nir_target(graph, X, run(graph, X), {})
    assert "NIR has no reduction node" in str(e.value) and says in str(e.value), e.value
