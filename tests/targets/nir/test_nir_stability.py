"""The NIR frontend refuses neuron parameters that make the discretized neuron unstable.

A negative or zero time constant, or a ``dt`` larger than the time constant (a negative decay ``1 - dt/tau``),
used to compile with exit 0 into a membrane that grows every step. Each is now a BadInput naming the NIR
node, the parameter and its value, with the remedy; ``allow_unstable=True`` (the CLI's --allow-unstable)
lets a finite decay through; stable files, including ``dt == tau`` (decay 0), compile as before.
"""
import json
import re
from pathlib import Path

import nir
import numpy as np
import pytest
from click.testing import CliRunner

from spikec.core.checker import compare_with_torch
from spikec.app.cli import main
from spikec.ir.errors import BadInput
from spikec.frontend import trace
from spikec.frontend.nir_file import load_nir, nir_model

N = 3
DT = 1e-4
GOLDEN = Path(__file__).resolve().parent / "golden" / "snntorch_conv.nir"


def lif(tau=1e-3):
    return nir.LIF(tau=np.broadcast_to(np.asarray(tau, dtype=float), (N,)).copy(), r=np.ones(N),
                   v_leak=np.zeros(N), v_threshold=np.ones(N), v_reset=np.zeros(N))


def cuba(tau_syn=1e-3, tau_mem=2e-3, fire=True):
    kw = dict(tau_syn=np.full(N, tau_syn), tau_mem=np.full(N, tau_mem), r=np.ones(N), v_leak=np.zeros(N),
              w_in=np.ones(N))
    return nir.CubaLIF(**kw, v_threshold=np.ones(N), v_reset=np.zeros(N)) if fire else nir.CubaLI(**kw)


def li(tau=1e-3):
    return nir.LI(tau=np.full(N, tau), r=np.ones(N), v_leak=np.zeros(N))


def if_():
    return nir.IF(r=np.ones(N), v_threshold=np.ones(N), v_reset=np.zeros(N))


def decays(g) -> np.ndarray:
    """Every decay of the IR's neurons: lif's beta; synaptic_snntorch's (a CubaLIF read as Synaptic) alpha, beta."""
    keys = {"lif": ("beta",), "synaptic_snntorch": ("alpha", "beta")}
    return np.concatenate([np.atleast_1d(n.params[k]) for n in g.nodes for k in keys.get(n.op, ())])


def graph(neuron, name="cell"):
    return nir.NIRGraph(nodes={"input": nir.Input(np.array([N])), "fc": nir.Linear(weight=np.eye(N) * 20.0),
                               name: neuron, "output": nir.Output(np.array([N]))},
                        edges=[("input", "fc"), ("fc", name), (name, "output")], metadata={})


UNSTABLE = [
    ("LIF negative tau", lambda: lif(-1e-2), "LIF", "tau", "-0.01", "not a positive time constant"),
    ("LIF dt > tau", lambda: lif(5e-5), "LIF", "tau", "5e-05", "outside \\[0, 1\\]"),
    ("LIF one channel", lambda: lif([1e-3, 4e-5, 1e-3]), "LIF", "tau\\[1\\]", "4e-05", "decay"),
    ("LI negative tau", lambda: li(-3e-3), "LI", "tau", "-0.003", "grow"),
    ("LI dt > tau", lambda: li(2e-5), "LI", "tau", "2e-05", "outside"),
    ("CubaLIF negative tau_mem", lambda: cuba(tau_mem=-1e-3), "CubaLIF", "tau_mem", "-0.001", "grow"),
    ("CubaLIF dt > tau_syn", lambda: cuba(tau_syn=3e-5), "CubaLIF", "tau_syn", "3e-05", "outside"),
    ("CubaLI dt > tau_mem", lambda: cuba(tau_mem=9e-5, fire=False), "CubaLI", "tau_mem", "9e-05", "outside"),
]


@pytest.mark.parametrize("scheme", ["snntorch", "norse"])
@pytest.mark.parametrize("case,make,kind,param,value,why", UNSTABLE, ids=[c[0] for c in UNSTABLE])
def test_unstable_parameters_name_the_node_and_parameter(case, make, kind, param, value, why, scheme):
    with pytest.raises(BadInput) as e:
        load_nir(graph(make()), dt=DT, scheme=scheme)
    msg = str(e.value)
    assert e.value.where == f"NIR node 'cell' ({kind})"
    assert re.search(f"{param} = {value}", msg) and re.search(why, msg), msg
    assert "--allow-unstable" in e.value.remedy
    if "dt >" in case or "channel" in case:
        assert "smaller --dt" in e.value.remedy
    # allowed on request: the IR keeps the decay the file implies
    g = load_nir(graph(make()), dt=DT, scheme=scheme, allow_unstable=True)
    betas = decays(g)
    assert ((betas < 0) | (betas > 1)).any()


def test_the_value_in_the_message_is_the_decay_the_compiler_would_use():
    with pytest.raises(BadInput, match=r"1 - dt/tau = 1\.01 "):
        load_nir(graph(lif(-1e-2)), dt=DT)
    with pytest.raises(BadInput, match=r"1 - dt\*\(1/tau\) = -1,"):
        load_nir(graph(lif(5e-5)), dt=DT, scheme="norse")
    with pytest.raises(BadInput, match=r"at most 5e-05"):
        load_nir(graph(lif(5e-5)), dt=DT)


def test_a_zero_time_constant_is_refused_even_when_unstable_is_allowed():
    for allow in (False, True):
        with pytest.raises(BadInput, match="tau_syn = 0 gives the decay.*-inf") as e:
            load_nir(graph(cuba(tau_syn=0.0)), dt=DT, allow_unstable=allow)
        assert e.value.where == "NIR node 'cell' (CubaLIF)"
    with pytest.raises(BadInput, match="tau = nan"):
        load_nir(graph(lif(np.nan)), dt=DT, allow_unstable=True)


def test_nested_graph_names_the_inlined_node():
    inner = graph(lif(-1e-3), name="neuron")
    outer = nir.NIRGraph(nodes={"input": nir.Input(np.array([N])), "block": inner, "output": nir.Output(np.array([N]))},
                         edges=[("input", "block"), ("block", "output")], metadata={})
    with pytest.raises(BadInput) as e:
        load_nir(outer, dt=DT)
    assert "block.neuron" in e.value.where and "tau = -0.001" in str(e.value)


def test_nir_model_refuses_at_construction_and_threads_allow_unstable(tmp_path):
    path = tmp_path / "neg.nir"
    nir.write(path, graph(lif(-1e-2)))
    with pytest.raises(BadInput, match="NIR node 'cell' \\(LIF\\): tau = -0.01"):
        nir_model(path, dt=DT)
    model = nir_model(path, dt=DT, allow_unstable=True)
    assert model.allow_unstable and "allow_unstable" in repr(model)
    g = trace(model, model.input_shape)   # the converter gets the flag too
    assert any(n.op == "lif" and float(np.max(n.params["beta"])) > 1 for n in g.nodes)


def test_cli_exits_2_naming_the_node(tmp_path):
    path = tmp_path / "late.nir"
    nir.write(path, graph(li(2e-5)))
    res = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "out"), "--steps", "4",
                                    "--batch", "2"])
    assert res.exit_code == 2, res.output
    assert "NIR node 'cell' (LI)" in res.output and "tau = 2e-05" in res.output and "smaller --dt" in res.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scheme", ["snntorch", "norse"])
@pytest.mark.parametrize("make", [lambda: lif(1e-3), lambda: lif(DT), lambda: li(2e-3), lambda: cuba(),
                                  lambda: cuba(fire=False), if_], ids=["LIF", "LIF dt == tau", "LI", "CubaLIF",
                                                                       "CubaLI", "IF"])
def test_stable_files_still_compile(make, scheme):
    g = load_nir(graph(make()), dt=DT, scheme=scheme)
    betas = decays(g)
    assert ((betas >= 0) & (betas <= 1)).all()


def test_stable_file_compiles_through_the_cli(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", str(GOLDEN), "-o", str(out), "--steps", "4", "--batch", "2"])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "report.json").read_text())["frontend"]["equivalent"]
    model = nir_model(GOLDEN, dt=DT, scheme="norse")
    x = (np.random.default_rng(0).random((6, 2, *model.input_shape)) < 0.4).astype(np.float64)
    assert compare_with_torch(model, trace(model, model.input_shape), x).equivalent

