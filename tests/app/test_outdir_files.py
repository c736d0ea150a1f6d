"""What verify and compile read from outside: OUTDIR's code runs only when asked, OUTDIR files are regular files
read without following links, a .nir keeps its arrays inside, the marker is a file of a known version, and a write
that runs out of space says so and leaves nothing behind."""
import errno
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from app_helpers import assert_clean_failure, cli, snapshot
from spikec.app import outdir as owned
from spikec.ir.errors import BadInput

NET = ("import torch\nfrom torch import nn\nimport spikec.nn as snn\nfrom model import width\n\n"
       "def build():\n    torch.manual_seed(0)\n"
       "    m = nn.Sequential(nn.Linear(6, width()), snn.LIF(beta=0.5, threshold=0.5), nn.Linear(width(), 2))\n"
       "    m.input_shape, m.steps = (6,), 3\n    return m\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An entry file ``net.py`` importing a sibling ``model.py``, compiled once (no target); tests work on copies."""
    root = tmp_path_factory.mktemp("files")
    (root / "src").mkdir()
    (root / "src" / "net.py").write_text(NET)
    (root / "src" / "model.py").write_text("def width():\n    return 5\n")
    result = cli("compile", f"{root / 'src' / 'net.py'}:build", "-o", root / "out")
    assert result.exit_code == 0, result.output
    sys.modules.pop("model", None)  # as in a new process: verify imports the sibling again, from OUTDIR
    return root / "out"


@pytest.fixture
def out(built, tmp_path, monkeypatch):
    copy = tmp_path / "out"
    shutil.copytree(built, copy)
    monkeypatch.delitem(sys.modules, "model", raising=False)
    return copy


def _run_with_timeout(fn, seconds=60):
    """``fn()``'s result, or a test failure if it is still running after ``seconds`` (a hang on a FIFO)."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: it waits on the FIFO"
    return box["result"]


# -- the source copy ------------------------------------------------------------------------------------------

def test_an_entry_importing_a_sibling_model_py_keeps_both_names_and_verifies(out):
    names = sorted(p.name for p in (out / "source").iterdir())
    assert names == ["model.py", "net.py", "weights.pt"]
    assert (out / "source" / "model.py").read_text() == "def width():\n    return 5\n"
    assert json.loads((out / "report.json").read_text())["provenance"]["source_file"] == "source/net.py"
    result = cli("verify", out, "--run-source")
    assert result.exit_code == 0, result.output
    assert "source_vs_deployed   ok" in result.output and "passes_replayed      ok" in result.output
    assert f"source: {out / 'source' / 'net.py'}:build (the code OUTDIR carries" in result.output


# -- no code from OUTDIR unless asked ---------------------------------------------------------------------------

def test_a_line_added_to_the_source_copy_does_not_run_by_default(out, tmp_path):
    flag = tmp_path / "ran"
    entry = out / "source" / "net.py"
    entry.write_text(f"from pathlib import Path\nPath({str(flag)!r}).write_text('ran')\n" + entry.read_text())
    result = cli("verify", out)
    assert result.exit_code == 0, result.output
    assert not flag.exists()
    assert "io_outputs           ok" in result.output
    assert "source_vs_deployed   NOT RUN" in result.output and "--run-source" in result.output
    assert str(entry) in result.output
    result = cli("verify", out, "--run-source")  # asked: it runs, and verify says whose code it was
    assert result.exit_code == 0 and flag.exists(), result.output


def test_the_result_dict_says_the_source_was_not_run(out):
    from spikec.app.verify import verify_outdir
    results = verify_outdir(out)
    assert "source_vs_deployed" not in results and "passes_replayed" not in results
    note = results["source_not_run"]
    assert note["not_run"] and note["code"] == str(out / "source" / "net.py") and "--run-source" in note["remedy"]
    assert verify_outdir(out, run_source=True)["source_vs_deployed"]["equivalent"]


@pytest.mark.parametrize("planted", ["sklearn.py", "torch.py", "numpy", "json.py"])
def test_a_planted_module_shadowing_an_installed_one_is_refused(out, tmp_path, planted):
    flag = tmp_path / "ran"
    path = out / "source" / planted
    if not planted.endswith(".py"):
        path.mkdir()
        path = path / "__init__.py"
    path.write_text(f"from pathlib import Path\nPath({str(flag)!r}).write_text('ran')\n")
    assert cli("verify", out).exit_code == 0 and not flag.exists()
    result = cli("verify", out, "--run-source")
    assert_clean_failure(result, 2, planted.removesuffix(".py"), "installed module", "--model")
    assert not flag.exists()


def test_weights_without_a_model_to_run_are_refused(out):
    result = cli("verify", out, "--weights", out / "source" / "weights.pt")
    assert_clean_failure(result, 2, "--weights", "--run-source")


def test_a_data_set_run_needs_code_it_is_allowed_to_run(out, tmp_path):
    with np.load(out / "io.npz") as z:
        np.savez(tmp_path / "data.npz", input=z["input"])
    result = cli("verify", out, "--inputs", tmp_path / "data.npz", "--workers", "1")
    assert_clean_failure(result, 2, "data-set verification", "--run-source")
    result = cli("verify", out, "--inputs", tmp_path / "data.npz", "--workers", "1", "--run-source")
    assert result.exit_code == 0, result.output


# -- regular files only, no links --------------------------------------------------------------------------

def test_a_symlinked_graph_json_is_refused(out, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text((out / "graph.json").read_text())  # even a valid graph is not read through a link
    (out / "graph.json").unlink()
    (out / "graph.json").symlink_to(secret)
    assert_clean_failure(cli("verify", out), 2, "graph.json", "symbolic link", str(secret), "remedy")


def test_a_symlinked_source_directory_is_refused(out, tmp_path):
    shutil.move(out / "source", tmp_path / "elsewhere")
    (out / "source").symlink_to(tmp_path / "elsewhere")
    assert_clean_failure(cli("verify", out, "--run-source"), 2, "source", "symbolic link")


@pytest.mark.parametrize("name", ["report.json", "io.npz", "source/weights.pt"])
def test_a_fifo_in_outdir_is_refused_without_hanging(out, name):
    (out / name).unlink()
    os.mkfifo(out / name)
    result = _run_with_timeout(lambda: cli("verify", out, "--run-source"))
    assert_clean_failure(result, 2, name.rpartition("/")[2], "FIFO")


def test_a_fifo_marker_does_not_hang_compile_or_verify(out, built, tmp_path):
    (out / ".spikec").unlink()
    os.mkfifo(out / ".spikec")
    assert_clean_failure(_run_with_timeout(lambda: cli("verify", out)), 2, ".spikec", "FIFO")
    src = tmp_path / "src"
    src.mkdir()
    (src / "net.py").write_text(NET)
    (src / "model.py").write_text("def width():\n    return 5\n")
    result = _run_with_timeout(lambda: cli("compile", f"{src / 'net.py'}:build", "-o", out))
    assert_clean_failure(result, 2, "did not write", "FIFO")


def test_a_fifo_report_of_a_previous_outdir_does_not_hang_compile(out):
    """A compile that is not equivalent reads the old OUTDIR's report (does it hold an equivalent compile?)."""
    (out / "report.json").unlink()
    os.mkfifo(out / "report.json")
    assert _run_with_timeout(lambda: owned.holds_equivalent_compile(out)) is True  # unreadable: kept, to be safe


@pytest.mark.parametrize("command", ["compile", "verify"])
def test_dev_zero_as_inputs_is_refused(out, tmp_path, command):
    src = tmp_path / "src"
    src.mkdir()
    (src / "net.py").write_text(NET)
    (src / "model.py").write_text("def width():\n    return 5\n")
    args = ["compile", f"{src / 'net.py'}:build", "-o", tmp_path / "new"] if command == "compile" else ["verify", out]
    result = _run_with_timeout(lambda: cli(*args, "--inputs", "/dev/zero"))
    assert_clean_failure(result, 2, "/dev/zero", "character device", "not a regular file")
    assert not (tmp_path / "new").exists()


def test_a_fifo_as_inputs_or_weights_is_refused_without_hanging(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "net.py").write_text(NET)
    (src / "model.py").write_text("def width():\n    return 5\n")
    os.mkfifo(tmp_path / "pipe")
    for option in ("--inputs", "--weights"):
        result = _run_with_timeout(lambda: cli("compile", f"{src / 'net.py'}:build", option, tmp_path / "pipe",
                                               "-o", tmp_path / "new"))
        assert_clean_failure(result, 2, "pipe", "FIFO")


def test_an_oversized_report_is_refused_with_its_limit(out):
    with open(out / "report.json", "r+b") as f:
        f.truncate(65 << 20)  # sparse: no disk used
    assert_clean_failure(cli("verify", out), 2, "report.json", "over the limit of 67,108,864 bytes")


# -- the ownership marker ---------------------------------------------------------------------------------

def test_a_marker_of_an_unknown_version_is_not_ownership(out, tmp_path):
    (out / ".spikec").write_text(json.dumps({"format": "spikec-outdir", "version": 999}))
    assert_clean_failure(cli("verify", out), 2, ".spikec", "version 999", "version 1")
    before = snapshot(out)
    src = tmp_path / "src"
    src.mkdir()
    (src / "net.py").write_text(NET)
    (src / "model.py").write_text("def width():\n    return 5\n")
    result = cli("compile", f"{src / 'net.py'}:build", "-o", out)
    assert_clean_failure(result, 2, "did not write", "version 999")
    assert snapshot(out) == before


def test_a_marker_linked_to_another_outdirs_marker_is_not_ownership(out, built, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work\n")
    (mine / ".spikec").symlink_to(built / ".spikec")
    assert not owned.is_owned(mine) and "symbolic link" in owned.ownership(mine)
    src = tmp_path / "src"
    src.mkdir()
    (src / "net.py").write_text(NET)
    (src / "model.py").write_text("def width():\n    return 5\n")
    result = cli("compile", f"{src / 'net.py'}:build", "-o", mine)
    assert_clean_failure(result, 2, "did not write", "symbolic link")
    assert (mine / "thesis.tex").read_text() == "years of work\n"
    (out / ".spikec").unlink()
    (out / ".spikec").symlink_to(built / ".spikec")
    assert_clean_failure(cli("verify", out), 2, "not an OUTDIR", "symbolic link")


# -- writing: out of space, stale temp trees ---------------------------------------------------------------

@pytest.mark.parametrize("named", [True, False], ids=["open names the file", "write names none"])
def test_no_space_mid_write_is_named_and_leaves_the_old_outdir_and_no_temp(out, named):
    before = snapshot(out)
    with pytest.raises(BadInput) as e:
        with owned.writing(out) as tmp:
            (tmp / "graph.json").write_text("{}")
            (tmp / "io.npz").write_bytes(b"PK")  # a full disk: the file is created, its write() fails
            later = (tmp / "graph.json").stat().st_mtime_ns + 10**9  # newer whatever the clock's granularity
            os.utime(tmp / "io.npz", ns=(later, later))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([str(tmp / "io.npz")] if named else []))
    where = str(out / "io.npz") if named else f"{out}/ (the last file written: io.npz)"
    assert f"no space left on device while writing {where}: " in e.value.what and "MB free" in e.value.what
    assert e.value.remedy.startswith("free ") and e.value.remedy.endswith(" MB or choose another -o")
    assert snapshot(out) == before
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]


def test_a_compile_that_fills_the_disk_is_named_and_keeps_the_old_outdir(out, tmp_path, monkeypatch):
    """The driver writes through outdir.writing: a full disk mid-write is exit 2 naming it, not an internal error."""
    import spikec.app.driver as driver
    src = tmp_path / "src2"
    src.mkdir()
    (src / "net.py").write_text(NET)
    (src / "model.py").write_text("def width():\n    return 5\n")

    def full(report, before, graph, path, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(driver, "write_html", full)
    before = snapshot(out)
    result = cli("compile", f"{src / 'net.py'}:build", "-o", out)
    assert_clean_failure(result, 2, "no space left on device while writing", "MB or choose another -o")
    assert snapshot(out) == before
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]


def test_no_space_for_the_temp_dir_marker_leaves_no_temp(tmp_path, monkeypatch):
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name == owned.MARKER:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(BadInput) as e:
        owned.make_temp_dir(tmp_path / "out")
    assert "no space left on device while writing" in e.value.what and str(tmp_path / "out" / ".spikec") in e.value.what
    assert list(tmp_path.iterdir()) == []


def test_another_write_error_is_named_too(out):
    with pytest.raises(BadInput) as e:
        with owned.writing(out) as tmp:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp / "io.npz"))
    assert "cannot write OUTDIR" in e.value.what and str(out / "io.npz") in e.value.what
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]


def _temp(parent: Path, name: str) -> Path:
    d = parent / name
    d.mkdir()
    (d / owned.MARKER).write_text(owned.marker_text())
    (d / "graph.json").write_text("{}")
    return d


def test_stale_temp_trees_of_dead_runs_are_swept_and_a_live_runs_kept(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its PID is now free: a dead run
    live_tag = owned._run_tag()
    dead = _temp(tmp_path, f".out.tmp-{child.pid}-123-abc123")
    dead_old = tmp_path / f".other.old-{child.pid}-123-xyz"
    dead_old.mkdir()
    shutil.copytree(dead, dead_old / "previous")
    reused = _temp(tmp_path, f".out.tmp-{os.getpid()}-1-reused")  # this PID, another start time: a reused PID
    live = _temp(tmp_path, f".out.tmp-{live_tag}-live01")
    unknown = _temp(tmp_path, ".out.tmp-k2j3h4")  # no PID recorded: never judged dead
    foreign = tmp_path / f".out.tmp-{child.pid}-123-mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("not spikec's\n")
    tmp = owned.make_temp_dir(tmp_path / "out")
    assert not dead.exists() and not dead_old.exists() and not reused.exists()
    assert live.exists() and unknown.exists() and foreign.exists() and tmp.exists()
    assert tmp.name.startswith(f".out.tmp-{live_tag}-")


# -- NIR files: every array inside ---------------------------------------------------------------------------

def _nir_file(path: Path) -> Path:
    import nir
    graph = nir.NIRGraph.from_list(nir.Affine(np.ones((2, 3)), np.zeros(2)),
                                   nir.LIF(tau=np.full(2, 2e-3), r=np.ones(2), v_leak=np.zeros(2),
                                           v_threshold=np.ones(2)))
    nir.write(path, graph)
    return path


def _weight_path(f) -> str:
    found = []
    f.visit(lambda name: found.append(name) if name.endswith("/weight") else None)
    return found[0]


def _external_link(path, tmp_path):
    import h5py
    with h5py.File(tmp_path / "other.h5", "w") as o:
        o["data"] = np.full((2, 3), 7.0)
    with h5py.File(path, "r+") as f:
        name = _weight_path(f)
        del f[name]
        f[name] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/data")
    return name


def _external_storage(path, tmp_path):
    import h5py
    raw = tmp_path / "passwd"
    raw.write_bytes(np.full((2, 3), 7.0).tobytes())
    with h5py.File(path, "r+") as f:
        name = _weight_path(f)
        del f[name]
        f.create_dataset(name, shape=(2, 3), dtype="f8", external=[(str(raw), 0, 48)])
    return name


def _soft_link(path, tmp_path):
    import h5py
    with h5py.File(path, "r+") as f:
        name = _weight_path(f)
        f["hidden"] = f[name][()]
        del f[name]
        f[name] = h5py.SoftLink("/hidden")
    return name


def _virtual(path, tmp_path):
    import h5py
    with h5py.File(tmp_path / "other.h5", "w") as o:
        o["data"] = np.full((2, 3), 7.0)
    with h5py.File(path, "r+") as f:
        name = _weight_path(f)
        del f[name]
        layout = h5py.VirtualLayout(shape=(2, 3), dtype="f8")
        layout[:] = h5py.VirtualSource(str(tmp_path / "other.h5"), "data", shape=(2, 3))
        f.create_virtual_dataset(name, layout)
    return name


@pytest.mark.parametrize("tamper, phrase", [(_external_link, "external link"), (_external_storage, "external file"),
                                            (_soft_link, "soft link"), (_virtual, "virtual dataset")])
def test_a_nir_file_reading_outside_itself_is_refused(tmp_path, tamper, phrase):
    import nir
    path = _nir_file(tmp_path / "net.nir")
    name = tamper(path, tmp_path)
    assert np.all(nir.read(path).nodes[name.split("/")[-2]].weight == 7.0) or phrase == "soft link"  # nir follows it
    result = cli("compile", path, "-o", tmp_path / "out")
    assert_clean_failure(result, 2, "net.nir", phrase, f"'/{name}'", "inside the .nir file")
    assert not (tmp_path / "out").exists()
    assert_clean_failure(cli("nir-check", path), 2, phrase, f"'/{name}'")


def test_a_plain_nir_file_passes_the_check(tmp_path):
    from spikec.formats.nir import hdf5
    path = _nir_file(tmp_path / "net.nir")
    hdf5.check_file(path)
    assert set(hdf5.read(path).nodes) == set(__import__("nir").read(path).nodes)
