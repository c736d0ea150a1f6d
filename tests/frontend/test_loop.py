"""--stepping loop (spikec/frontend/loop.py): a forward running its own time loop is captured on concrete
inputs and folded back into one step. The fold must reproduce the model exactly, and refuse, naming what
differs, every loop that is not T copies of one step with neuron state chained from a reset state."""
import numpy as np
import pytest
import torch
from torch import nn

from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import trace
from spikec.frontend.loop import bind
from spikec.frontend.tracing import is_leaf

snntorch = pytest.importorskip("snntorch")


def folded(model, x):
    """Bind, trace and run the fold; returns (graph, IR outputs, the model's own outputs, looped adapter)."""
    model = model.double()
    looped, xx = bind(model, torch.as_tensor(x, dtype=torch.float64), is_leaf)
    graph = trace(looped, tuple(xx.shape[2:]), input_kind="real")
    got = run(graph, xx.numpy()).outputs(graph)
    with torch.no_grad():
        want = looped(xx)
    want = want if isinstance(want, tuple) else (want,)
    return graph, got, [w.numpy() for w in want], looped


class Indexed(nn.Module):
    """``x[step]`` over ``range(x.shape[0])``, explicit snnTorch state, two recorded outputs."""

    def __init__(self, reset="subtract"):
        super().__init__()
        self.fc = nn.Linear(5, 6)
        self.lif = snntorch.Leaky(beta=0.8, threshold=0.5, reset_mechanism=reset)

    def forward(self, x):
        mem = self.lif.init_leaky()
        spk_rec, mem_rec = [], []
        for step in range(x.shape[0]):
            spk, mem = self.lif(self.fc(x[step]), mem)
            spk_rec.append(spk)
            mem_rec.append(mem)
        return torch.stack(spk_rec), torch.stack(mem_rec)


class Iterates(nn.Module):
    """``for x_t in x`` with a hidden-state neuron (``init_hidden=True``)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 6)
        self.lif = snntorch.Leaky(beta=0.7, threshold=0.4, init_hidden=True)

    def forward(self, x):
        return torch.stack([self.lif(self.fc(x_t)) for x_t in x])


X = np.random.default_rng(0).normal(0.5, 1.0, size=(7, 3, 5))


@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
def test_an_indexed_loop_folds_exactly(reset):
    torch.manual_seed(0)
    model = Indexed(reset)
    # Weights and inputs on a dyadic grid: every sum is exact in float64, so the comparison is bit for bit
    # whatever order the BLAS kernel adds in (the IR's one product over T*B rows and torch's per-step products
    # were found 1 ulp apart on another CPU); what is tested is the fold, not the summation order.
    with torch.no_grad():
        for p in model.fc.parameters():
            p.copy_(torch.round(p * 64) / 64)
    graph, got, want, looped = folded(model, np.round(X * 8) / 8)
    assert not looped.static and len(got) == 2
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    assert 0 < got[0].mean() < 1  # the neuron fires and rests: the check can fail
    assert sum(n.op.startswith("lif") for n in graph.nodes) == 2  # spikes and membrane, one neuron each


def test_iterating_the_input_with_hidden_state_folds_exactly():
    torch.manual_seed(0)
    _, got, want, _ = folded(Iterates(), X)
    assert np.array_equal(got[0], want[0]) and 0 < got[0].mean() < 1


def test_a_static_input_is_repeated_over_the_loops_steps():
    class Static(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(5, 6)
            self.lif = snntorch.Leaky(beta=0.9, threshold=0.6)

        def forward(self, x):
            mem, rec = self.lif.init_leaky(), []
            for _ in range(9):
                spk, mem = self.lif(self.fc(x), mem)
                rec.append(spk)
            return torch.stack(rec)

    torch.manual_seed(0)
    graph, got, want, looped = folded(Static(), X[0])
    assert looped.static and got[0].shape[0] == 9
    assert np.array_equal(got[0], want[0]) and 0 < got[0].mean() < 1


def _refused(model, x, words):
    with pytest.raises(UnsupportedOp) as info:
        bind(model.double(), torch.as_tensor(x, dtype=torch.float64), is_leaf)
    assert words in str(info.value), str(info.value)
    assert "remedy" in str(info.value)


def test_a_step_dependent_branch_is_refused():
    class Branch(Indexed):
        def forward(self, x):
            mem, rec = self.lif.init_leaky(), []
            for step in range(x.shape[0]):
                cur = self.fc(x[step])
                if step == 3:
                    cur = cur + cur
                spk, mem = self.lif(cur, mem)
                rec.append(spk)
            return torch.stack(rec)
    _refused(Branch(), X, "step 3")


def test_state_not_chained_from_the_previous_step_is_refused():
    class Fresh(Indexed):
        def forward(self, x):
            rec = []
            for step in range(x.shape[0]):
                spk, _ = self.lif(self.fc(x[step]), self.lif.init_leaky())  # restarts every step
                rec.append(spk)
            return torch.stack(rec)
    _refused(Fresh(), X, "not what it returned")


def test_a_non_reset_initial_state_is_refused():
    class Warm(Indexed):
        def forward(self, x):
            mem, rec = torch.full((x.shape[1], 6), 0.3, dtype=x.dtype), []
            for step in range(x.shape[0]):
                spk, mem = self.lif(self.fc(x[step]), mem)
                rec.append(spk)
            return torch.stack(rec)
    _refused(Warm(), X, "reset state")


def test_returning_the_last_step_only_is_refused():
    class Last(Indexed):
        def forward(self, x):
            mem = self.lif.init_leaky()
            for step in range(x.shape[0]):
                spk, mem = self.lif(self.fc(x[step]), mem)
            return spk
    _refused(Last(), X, "not a record stacked")


def test_stacking_along_another_dim_is_refused():
    class Dim1(Indexed):
        def forward(self, x):
            return torch.stack(list(super().forward(x)[0]), dim=1)
    with pytest.raises(UnsupportedOp):
        bind(Dim1().double(), torch.as_tensor(X), is_leaf)


def test_data_dependent_control_flow_is_refused_with_the_remedy():
    class Data(Indexed):
        def forward(self, x):
            if x.sum() > 0:
                return super().forward(x)[0]
            return super().forward(-x)[0]
    _refused(Data(), X, "could not be captured")


def test_a_layer_computed_before_the_loop_on_all_steps_is_folded_as_multistep():
    class Pre(nn.Module):
        """The speed idiom: one conv over all steps (T and B merged), then the neuron loop over cur[t]."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(5, 6)
            self.lif = snntorch.Leaky(beta=0.8, threshold=0.5)

        def forward(self, x):
            T, B = x.shape[0], x.shape[1]
            cur = self.fc(x.flatten(0, 1)).unflatten(0, (T, B))
            mem, rec = self.lif.init_leaky(), []
            for t in range(T):
                spk, mem = self.lif(cur[t], mem)
                rec.append(spk)
            return torch.stack(rec)

    torch.manual_seed(0)
    graph, got, want, _ = folded(Pre(), X)
    assert np.array_equal(got[0], want[0]) and 0 < got[0].mean() < 1
    assert [n.op for n in graph.nodes] == ["input", "linear", "lif_snntorch"]


def test_batch_first_time_indexing_is_refused_with_the_layout_remedy():
    class BatchFirst(Indexed):
        def forward(self, x):
            mem, rec = self.lif.init_leaky(), []
            for t in range(x.shape[1]):
                spk, mem = self.lif(self.fc(x[:, t]), mem)
                rec.append(spk)
            return torch.stack(rec)
    _refused(BatchFirst(), X.transpose(1, 0, 2), "time first")
