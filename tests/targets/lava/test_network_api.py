"""``spikec.targets.lava.network(OUTDIR)``: the deployed network as Lava processes with its ports.

The README's example runs, as written (OUTDIR swapped for a small compiled one), in a process of its own and in a
session of its own: its outputs equal the integer reference bit for bit, and it leaves no process behind. Port
names and shapes follow ``network.json``; batches, sub-step schedules and host partitions run bit-exact too.
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MODELS = HERE / "models.py"


def readme_example() -> str:
    """The documented example of running the network yourself (docs/pipeline.md; README.md held it before)."""
    text = next(t for t in ((REPO / d).read_text() for d in ("docs/pipeline.md", "README.md"))
                if "spikec.targets.lava.network(OUTDIR)" in t)
    start = text.index("spikec.targets.lava.network(OUTDIR)")
    block = re.search(r"```python\n(.*?)\n\s*```", text[start:], re.S).group(1)
    return "\n".join(line[2:] if line.startswith("  ") else line for line in block.splitlines())


def compiled(tmp_path, factory, batch=2, seed=1):
    """The compile (shared with every test asking for the same one: lava_compiled.py) written to ``tmp_path``."""
    from lava_compiled import lava
    from spikec.app.driver import write_outdir
    c = lava(f"{MODELS}:{factory}", batch=batch, seed=seed)
    assert c.report["target"]["bit_exact"]
    return write_outdir(tmp_path / "out", c)


def _session_members(sid: int) -> list[int]:
    from spikec.targets.lava.supervisor import members
    return members(sid)


def test_the_readme_example_runs_bit_exact_and_leaves_nothing(tmp_path):
    out = compiled(tmp_path, "conv_mixed")
    code = readme_example()
    assert "Loihi2SimCfg" in code and "net.run(" in code
    code = code.replace("build/demo", str(out)).replace('y["head.1"]', 'y[net.output_names[0]]')
    code += f"\nnp.savez({str(tmp_path / 'y.npz')!r}, **y)\n"
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        time.sleep(0.5)
        left = _session_members(proc.pid)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]
    assert not left, f"the example left Lava processes behind: {left}"
    assert stdout.strip().splitlines()[-1] == "True", stdout
    from spikec.targets.lava import load
    x = np.load(out / "io.npz")["input"][:, :1]
    with np.load(tmp_path / "y.npz") as z:
        y = {k: z[k] for k in z.files}
    ref = load(out)(x)
    assert list(y) == ["layers.4.1"] and np.array_equal(y["layers.4.1"], ref) and ref.any()


def test_ports_follow_the_written_network(tmp_path):
    from spikec.targets.lava import load_deployed, network
    out = compiled(tmp_path, "conv_mixed")
    _, spec, _ = load_deployed(out)
    net = network(out, batch=3)
    assert list(net.processes) == [p["name"] for p in spec["processes"]]
    assert {n: [p.shape for p in ports] for n, ports in net.inputs.items()} == {"input": [(7, 9, 6)]}  # (W, H, 3*C)
    assert net.input_shapes == {"input": (7, 9, 6)} and net.flattened == {"input": [False]}
    assert {n: p.shape for n, p in net.outputs.items()} == {"layers.1": (6, 9, 18), "layers.3": (2, 5, 24),
                                                            "layers.4.1": (12,)}   # 3 samples folded
    assert net.output_names == ["layers.4.1"] and net.period == 1
    assert net.starts == {"layers.1": 1, "layers.3": 2, "layers.4.1": 3}
    kinds = {n: type(p).__name__ for n, p in net.processes.items()}
    assert kinds == {"layers.0.0": "Conv", "layers.1": "LIF", "layers.2.0": "Conv", "layers.3": "SpikecLIF",
                     "layers.4.1.synapse": "Dense", "layers.4.1": "LIF"}, kinds   # the read-out: Lava's LIF


BATCHED = ("dense_soft", "intfire_dense", "host_partition")


@pytest.fixture(scope="module")
def batched_runs(tmp_path_factory):
    """Each of ``BATCHED`` compiled and run by ``network(OUTDIR).run`` in one child process (Lava forks its workers
    from it; one interpreter for the three, each network its own run): ``factory -> (OUTDIR, y.npz)``."""
    runs, code = {}, "import numpy as np\nimport spikec.targets.lava as L\n"
    for factory in BATCHED:
        where = tmp_path_factory.mktemp(factory)
        out, y = compiled(where, factory, batch=2, seed=3), where / "y.npz"
        code += (f"net = L.network({str(out)!r}, batch=2)\nx = np.load({str(out / 'io.npz')!r})['input']\n"
                 f"np.savez({str(y)!r}, **net.run(x, record=list(net.outputs)), period=net.period)\n")
        runs[factory] = out, y
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                       start_new_session=True)
    return runs, r


@pytest.mark.parametrize("factory", BATCHED)
def test_run_equals_the_integer_reference_batched(batched_runs, factory):
    """Run in a child process: every recorded output, all samples at once."""
    runs, r = batched_runs
    assert r.returncode == 0, r.stderr[-3000:]
    out, y_file = runs[factory]
    from spikec.core.interpreter import run
    from spikec.targets.lava import load_deployed
    from spikec.targets.lava.ops import with_readouts
    q, spec, _ = load_deployed(out)
    x = np.load(out / "io.npz")["input"].astype(np.int64)
    trace = run(with_readouts(q), {q.inputs[0].name: x}, integer=True)
    with np.load(y_file) as z:
        y = {k: z[k] for k in z.files}
    for rec in spec["recorded"]:
        assert np.array_equal(y[rec["name"]], trace.values[rec["ir_node"]]), rec["name"]
    print(f"\n{factory}: period {int(y['period'])}, {len(spec['recorded'])} outputs bit-exact")


FLAT_INPUT = """
import torch
from torch import nn
import spikec.nn as snn


class FlatInput(nn.Module):
    input_shape, steps = (2, 3, 4), 6

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.fc = snn.TimeDistributed(nn.Flatten(), nn.Linear(24, 6))
        with torch.no_grad():
            self.fc[1].weight.mul_(3.0)
        self.lif = snn.LIF(beta=0.9, threshold=1.0, reset="subtract")   # SpikecLIF: no model.net (see the test)

    def forward(self, x):
        return self.lif(self.fc(x))


def small():
    return FlatInput()
"""


def test_an_image_input_read_flattened_by_a_dense(tmp_path):
    """The source's port is flattened for the Dense that reads it (Lava's (W, H, C) flatten order). The neuron
    resets by subtraction: with a hard reset the compile writes model.net and its netx check fails on this model
    (netx.run_netx connects a (W, H, C) source to netx's flat input port), a fault outside this API."""
    from spikec.app.driver import CompileOptions, compile_model, write_outdir
    (tmp_path / "flat.py").write_text(FLAT_INPUT)
    c = compile_model(CompileOptions(model=f"{tmp_path / 'flat.py'}:small", target="lava", batch=2, seed=2))
    assert c.report["target"]["bit_exact"]
    out = write_outdir(tmp_path / "out", c)
    code = (f"import numpy as np\nimport spikec.targets.lava as L\nnet = L.network({str(out)!r}, batch=2)\n"
            f"assert net.flattened == {{'input': [True]}} and net.input_shapes == {{'input': (4, 3, 4)}}\n"
            f"x = np.load({str(out / 'io.npz')!r})['input']\n"
            f"np.savez({str(tmp_path / 'y.npz')!r}, **net.run(x))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                       start_new_session=True)
    assert r.returncode == 0, r.stderr[-3000:]
    from spikec.targets.lava import load
    x = np.load(out / "io.npz")["input"]
    with np.load(tmp_path / "y.npz") as z:
        y = {k: z[k] for k in z.files}
    ref = load(out)(x)
    assert list(y) == ["lif"] and np.array_equal(y["lif"], ref) and ref.any()


def test_a_network_runs_once_and_checks_its_batch(tmp_path):
    from spikec.ir.errors import BadInput
    from spikec.targets.lava import network
    out = compiled(tmp_path, "dense_soft")
    net = network(out, batch=2)
    x = np.load(out / "io.npz")["input"]
    with pytest.raises(BadInput, match="built for 2"):
        net.encode("input", x[:, :1])
    net._ran = True
    with pytest.raises(BadInput, match="run already"):
        net.run(x)
