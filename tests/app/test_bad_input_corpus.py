"""A corpus of adversarial inputs through the CLI, in-process (``spikec.app.cli.main`` under click's CliRunner).

The contract every case checks: a bad input exits 2 with a message naming its cause (the file, node, module,
key or option) and a remedy; a tampered OUTDIR that is well formed but wrong exits 1 (FAILED), a malformed one
exits 2; never a traceback, never the "error: unexpected ..." bug report; nothing in the surrounding directory
changes (no partial OUTDIR, no ``.OUTDIR.tmp-*``, an earlier good OUTDIR untouched, no ``__pycache__`` beside
the model); and ``verify`` changes nothing at all.

Hand-written tables cover each failure class once; Hypothesis (derandomized, so CI is deterministic) mutates
MODEL specs, checkpoints, input arrays, options and OUTDIR documents around them. Everything runs on the small
``one_output``-style model below, whose failures take milliseconds.
"""
import contextlib
import itertools
import json
import os
import shutil
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app_helpers import cli

# -- the models --------------------------------------------------------------------------------------------------
MODELS = textwrap.dedent('''
    """Adversarial factories (written into each case's directory as model.py)."""
    import numpy
    import torch
    from torch import nn

    import spikec.nn as snn


    def good():
        torch.manual_seed(2)
        model = nn.Sequential(nn.Linear(12, 16), snn.LIF(beta=0.5, threshold=0.5), nn.Linear(16, 3))
        model.input_shape, model.steps = (12,), 4
        return model


    def no_shape():
        model = good()
        del model.input_shape
        return model


    def declares(shape, steps):
        def factory():
            model = good()
            model.input_shape, model.steps = shape, steps
            return model
        return factory


    shape_text, shape_zero, shape_negative, shape_float, shape_empty = (
        declares(s, 4) for s in ("abc", (0,), (-3,), (1.5,), ()))
    steps_zero, steps_negative, steps_text, steps_float, steps_huge = (
        declares((12,), t) for t in (0, -3, "4", 2.5, 10 ** 12))


    NOT_CALLABLE = 42


    def returns_none():
        return None


    def returns_tensor():
        return torch.zeros(3)


    def returns_class():
        return nn.Linear


    def takes_args(width, depth):
        return good()


    def raises_inside():
        return nn.Linear(12, "four")


    def nan_params():
        model = good()
        with torch.no_grad():
            model[0].weight[1, 2] = float("nan")
        return model


    def inf_buffer():
        model = good()
        model.register_buffer("scale", torch.tensor([1.0, float("inf")]))
        return model


    class NoForward(nn.Module):
        input_shape, steps = (12,), 4

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(12, 3)


    def no_forward():
        return NoForward()


    class Returns(nn.Module):
        """forward returns something other than one [T, B, ...] tensor (or a tuple of them)."""
        input_shape, steps = (12,), 4

        def __init__(self, kind):
            super().__init__()
            torch.manual_seed(3)
            self.kind, self.fc = kind, nn.Linear(12, 3)

        def forward(self, x):
            y = self.fc(x)
            if self.kind == "float":
                return 1.5
            if self.kind == "none":
                return None
            if self.kind == "str":
                return "spikes"
            if self.kind == "dict":
                return {"out": y}
            if self.kind == "nested":
                return y, (y, y)
            if self.kind == "rank":
                return y[0]
            if self.kind == "flat":
                return y.flatten()
            if self.kind == "numpy":
                return torch.as_tensor(numpy.asarray(y))
            return y


    returns_float, returns_nothing, returns_str, returns_dict, returns_nested, returns_rank, returns_flat, \\
        returns_numpy = (lambda k=k: Returns(k) for k in ("float", "none", "str", "dict", "nested", "rank", "flat",
                                                          "numpy"))


    def overflows():
        """Finite float32 weights whose float64 products overflow after a few layers."""
        layers = [nn.Linear(12, 12) for _ in range(12)]
        with torch.no_grad():
            for layer in layers:
                layer.weight.fill_(1e30)
                layer.bias.fill_(1e30)
        model = nn.Sequential(*layers)
        model.input_shape, model.steps = (12,), 2
        return model
''')

EXAMPLES = {"max_examples": 25, "deadline": None, "derandomize": True, "database": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}


class Corpus:
    """A root directory holding one good OUTDIR (compiled once) and a fresh directory per case."""

    def __init__(self, root: Path):
        self.root, self.count = root, itertools.count()
        self.good = root / "good"
        self.src = root / "src"
        self.src.mkdir()
        (self.src / "model.py").write_text(MODELS)
        done = cli("compile", f"{self.src / 'model.py'}:good", "-o", self.good)
        assert done.exit_code == 0, done.output
        self.good_state = torch.load(self.good / "source" / "weights.pt", weights_only=True)
        assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= set(self.good_state)

    def case(self) -> Path:
        """A fresh directory with its own copy of the models (so an import cannot leave files anywhere shared)."""
        ws = self.root / f"case{next(self.count)}"
        ws.mkdir()
        (ws / "model.py").write_text(MODELS)
        return ws


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("corpus"))


def tree(root: Path) -> dict:
    """Every entry under ``root`` (directories and symlinks too) with its bytes and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            out[rel] = ("dir",)
        elif p.is_file():
            out[rel] = ("file", p.read_bytes(), p.stat().st_mtime_ns)
        else:
            out[rel] = ("other", p.stat().st_mode)
    return out


def model(ws: Path, factory: str = "good") -> str:
    return f"{ws / 'model.py'}:{factory}"


REMEDY_PHRASES = ("remedy", "--help")  # spikec's own remedy line, or click's usage hint for a bad option value


def check(ws: Path, args, code, *phrases, changes_ok=(), prior: bool = False):
    """Run ``spikec *args`` in ``ws``; assert the exit code (or one of a tuple of codes), the phrases (each a
    string, or a tuple of alternatives; callables get the exit code), no traceback or bug report, a remedy for
    code 2, and that nothing under ``ws`` changed (``changes_ok``: names of top-level entries that may, e.g. the
    OUTDIR of a compile that succeeds)."""
    if prior:
        shutil.copytree(CORPUS.good, ws / "out", symlinks=True)
    before = tree(ws)
    result = cli(*args)
    err = result.stderr
    codes = code if isinstance(code, tuple) else (code,)
    assert result.exit_code in codes, (code, result.exit_code, result.output)
    code = result.exit_code
    phrases = [p for ph in phrases for p in (ph(code) if callable(ph) else [ph])]
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    assert "error: unexpected" not in err, err
    for phrase in phrases:
        alternatives = phrase if isinstance(phrase, tuple) else (phrase,)
        assert any(str(a) in err or str(a) in result.stdout for a in alternatives), f"{phrase!r} not in:\n{err}"
    if code == 2:
        assert any(r in err for r in REMEDY_PHRASES), f"no remedy in:\n{err}"
    after = tree(ws)
    top = lambda k: k.split(os.sep)[0]  # noqa: E731
    assert {k: v for k, v in after.items() if top(k) not in changes_ok} == \
        {k: v for k, v in before.items() if top(k) not in changes_ok}, sorted(set(after) ^ set(before))
    assert not [k for k in after if ".tmp-" in k or ".old-" in k], sorted(after)
    if code == 0 and args[0] == "compile":  # a complete OUTDIR
        out = Path(args[args.index("-o") + 1])
        assert {".spikec", "report.json", "graph.json", "weights.npz", "io.npz"} <= {p.name for p in out.iterdir()}
    return result


CORPUS: Corpus  # set by the autouse fixture below, so the tables can reach the good OUTDIR


@pytest.fixture(autouse=True)
def _corpus_global(corpus):
    global CORPUS
    CORPUS = corpus


@pytest.fixture
def ws(corpus, monkeypatch):
    """This case's directory, also the current directory (so '.' and relative paths stay inside it)."""
    d = corpus.case()
    monkeypatch.chdir(d)
    return d


@contextlib.contextmanager
def case_dir(corpus):
    d = corpus.case()
    with contextlib.chdir(d):
        yield d


def compile_args(ws, spec=None, *extra, out="out"):
    return ["compile", model(ws) if spec is None else spec, *extra, "-o", ws / out if isinstance(out, str) else out]


# -- models ------------------------------------------------------------------------------------------------------
def _file(name, text):
    def make(ws):
        (ws / name).write_text(text)
        return f"{ws / name}:model"
    return make


MODEL_CASES = {
    # name: (MODEL spec from ws, extra args, phrases)
    "syntax error": (_file("broken.py", "def model(:\n    pass\n"), [], ["broken.py", "SyntaxError"]),
    "raises at import": (_file("boom.py", "raise RuntimeError('boom at import')\n"), [],
                         ["boom.py", "boom at import"]),
    "imports a missing module": (_file("deps.py", "import not_a_module_spikec_knows\n"), [],
                                 ["deps.py", "not_a_module_spikec_knows"]),
    "returns None": (lambda ws: model(ws, "returns_none"), [], ["returns_none", "NoneType", "nn.Module"]),
    "returns a tensor": (lambda ws: model(ws, "returns_tensor"), [], ["returns_tensor", "Tensor", "nn.Module"]),
    "returns a class": (lambda ws: model(ws, "returns_class"), [], ["returns_class", "nn.Module"]),
    "factory takes arguments": (lambda ws: model(ws, "takes_args"), [], ["takes_args", "TypeError", "requires width, depth"]),
    "factory raises inside": (lambda ws: model(ws, "raises_inside"), [], ["raises_inside", "TypeError",
                                                                          "fix the error the factory raises"]),
    "factory is not callable": (lambda ws: model(ws, "NOT_CALLABLE"), [], ["NOT_CALLABLE", "not found"]),
    "no forward": (lambda ws: model(ws, "no_forward"), [], ["NoForward", "forward"]),
    "forward returns a float": (lambda ws: model(ws, "returns_float"), [], ["Returns", "forward returns a float"]),
    "forward returns None": (lambda ws: model(ws, "returns_nothing"), [], ["Returns", "forward returns None"]),
    "forward returns a str": (lambda ws: model(ws, "returns_str"), [], ["Returns", "forward returns a str"]),
    "forward returns a dict": (lambda ws: model(ws, "returns_dict"), [], ["Returns", "forward returns a dict"]),
    "forward returns a nested tuple": (lambda ws: model(ws, "returns_nested"), [],
                                       ["Returns", "forward returns a tuple holding a tuple"]),
    "forward returns the wrong rank": (lambda ws: model(ws, "returns_rank"), [], ["'getitem'", "indexing"]),
    "forward flattens T and B": (lambda ws: model(ws, "returns_flat"), [], ["'flatten'", "time/batch"]),
    "forward leaves torch": (lambda ws: model(ws, "returns_numpy"), [], ["model Returns", "torch.fx cannot trace"]),
    "NaN parameter": (lambda ws: model(ws, "nan_params"), [], ["NaN or Inf", "0.weight"]),
    "Inf buffer": (lambda ws: model(ws, "inf_buffer"), [], ["NaN or Inf", "scale"]),
    "declared input_shape is text": (lambda ws: model(ws, "shape_text"), [], ["input_shape", "'abc'"]),
    "declared input_shape has a 0": (lambda ws: model(ws, "shape_zero"), [], ["input_shape", "(0,)"]),
    "declared input_shape is negative": (lambda ws: model(ws, "shape_negative"), [], ["input_shape", "(-3,)"]),
    "declared input_shape is fractional": (lambda ws: model(ws, "shape_float"), [], ["input_shape", "1.5"]),
    "declared input_shape is empty": (lambda ws: model(ws, "shape_empty"), [], ["input_shape", "()"]),
    "declared steps 0": (lambda ws: model(ws, "steps_zero"), [], ["steps", "0"]),
    "declared steps negative": (lambda ws: model(ws, "steps_negative"), [], ["steps", "-3"]),
    "declared steps text": (lambda ws: model(ws, "steps_text"), [], ["steps", "'4'"]),
    "declared steps fractional": (lambda ws: model(ws, "steps_float"), [], ["steps", "2.5"]),
    "declared steps huge": (lambda ws: model(ws, "steps_huge"), [], ["over the limit"]),
    "weights overflow to Inf": (lambda ws: model(ws, "overflows"), [], ["Sequential", "NaN, Inf"]),
    "unknown shape": (lambda ws: model(ws, "no_shape"), [], ["input shape", "--input-shape"]),
    "a directory as model file": (lambda ws: (ws / "pkg.py").mkdir() or f"{ws / 'pkg.py'}:model", [], ["pkg.py"]),
    "a directory as MODEL": (lambda ws: str(ws), [], ["names no factory"]),
    "a .nir that is not NIR": (lambda ws: (ws / "fake.nir").write_text("not hdf5\n") and str(ws / "fake.nir"), [],
                               ["fake.nir"]),
    "an empty .nir": (lambda ws: (ws / "empty.nir").write_bytes(b"") or str(ws / "empty.nir"), [], ["empty.nir"]),
    "a missing .nir": (lambda ws: str(ws / "missing.nir"), [], ["missing.nir"]),
    "a directory named .nir": (lambda ws: (ws / "d.nir").mkdir() or str(ws / "d.nir"), [], ["d.nir"]),
    "a .nir with --weights": (lambda ws: str(ws / "x.nir"),
                              lambda ws: ["--weights", CORPUS.good / "source" / "weights.pt"], ["--weights"]),
}


@pytest.mark.parametrize("prior", [False, True], ids=["no-outdir", "prior-outdir"])
@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_bad_model(ws, case, prior):
    spec, extra, phrases = MODEL_CASES[case]
    extra = extra(ws) if callable(extra) else extra
    check(ws, compile_args(ws, spec(ws), *extra), 2, *phrases, prior=prior)


@pytest.mark.parametrize("case", ["syntax error", "returns a tensor", "forward returns a dict", "NaN parameter",
                                  "declared steps negative", "a .nir that is not NIR"])
def test_bad_model_inspect(ws, case):
    spec, extra, phrases = MODEL_CASES[case]
    check(ws, ["inspect", spec(ws), *(extra(ws) if callable(extra) else extra)], 2, *phrases)


def test_loading_a_model_writes_no_bytecode_beside_it(ws, monkeypatch):
    monkeypatch.setattr("sys.dont_write_bytecode", False)
    check(ws, compile_args(ws, model(ws, "returns_none")), 2, "returns_none")  # imported, and nothing written


# MODEL specs from fragments (stdlib modules with harmless zero-argument callables only: no fork, no exit).
SPEC_FRAGMENTS = ["", ":", "::", ".", "..", " ", "ü", "☃", "/", "\\", "x.py", ".py", "model.py", "dir",
                  "with space.py", "üñí.py", "os", "os.path", "json", "torch.nn", "getcwd", "getpid", "sep",
                  "Module", "Identity", "good", "returns_none", "nothing", ".nir", "dir.nir", "$HOME", "~", "*",
                  "\n", "\t", "-", "--help", "--target"]


def _expected_spec_phrases(spec: str, ws: Path):
    """What a refused spec's message must name: the spec, its file, module or factory (one of them)."""
    where, _, attr = spec.rpartition(":")
    names = tuple(n for n in (spec, repr(spec)[1:-1], where, attr) if n.strip())
    # a stdlib factory may build a module with no input_shape: then the message names the option to give
    return names + ("--input-shape",) if names else ("names no factory",)


@settings(max_examples=60, **{k: v for k, v in EXAMPLES.items() if k != "max_examples"})
@given(parts=st.lists(st.sampled_from(SPEC_FRAGMENTS), min_size=0, max_size=5), absolute=st.booleans())
def test_mutated_model_specs(corpus, parts, absolute):
    with case_dir(corpus) as ws:
        (ws / "dir").mkdir()
        (ws / "dir.nir").mkdir()
        (ws / "with space.py").write_text(MODELS)
        (ws / "üñí.py").write_text(MODELS)
        spec = "".join(parts)
        if absolute and spec and not spec.startswith(("/", "-")):
            spec = f"{ws}/{spec}"
        if spec.startswith("-"):  # click would read it as an option: pass it after "--"
            args = ["compile", "-o", ws / "out", "--", spec]
        else:
            args = compile_args(ws, spec)
        where, _, attr = spec.rpartition(":")
        if attr == "good" and where.endswith(".py") and (ws / where).is_file():  # a real factory: it compiles
            check(ws, args, 0, changes_ok=("out",))
            return
        check(ws, args, 2, _expected_spec_phrases(spec, ws))


@pytest.mark.parametrize("spec", ["os:getcwd", "os:getpid", "os:system", "json:loads", "builtins:object",
                                  "torch.nn:Module", "torch.nn:Identity", "os.path:sep", "sys:exit", "os:nope",
                                  "no_such_pkg_spikec:f", "os.:getcwd", ".os:getcwd", "os..path:sep", ":f", "::",
                                  ":", "", " ", "os:", "model.py:", "model.py::good", "./model.py:good:", "\x00:f",
                                  "model.py\x00:good", "dir\x00.nir",
                                  "x" * 300 + ".py:good", "x" * 300 + ".nir", "x" * 300 + ":good"])
def test_stdlib_and_malformed_specs(ws, spec):
    result = check(ws, compile_args(ws, spec), 2, _expected_spec_phrases(spec, ws))
    assert "remedy" in result.stderr


# -- weights -----------------------------------------------------------------------------------------------------
def _save(obj):
    def make(ws):
        torch.save(obj() if callable(obj) else obj, ws / "ckpt.pt")
        return ws / "ckpt.pt"
    return make


def _bytes(data):
    def make(ws):
        (ws / "ckpt.pt").write_bytes(data() if callable(data) else data)
        return ws / "ckpt.pt"
    return make


def _state(key, value):
    """The good state_dict with one entry replaced (a callable gets the old value; None: removed)."""
    changes = {key: value}

    def build():
        state = dict(CORPUS.good_state)
        for key, v in changes.items():
            if v is None:
                state.pop(key)
            else:
                state[key] = v(state[key]) if callable(v) else v
        return state
    return build


def _truncated():
    data = (CORPUS.good / "source" / "weights.pt").read_bytes()
    return data[: len(data) // 2]


WEIGHT_CASES = {
    # name: (make the checkpoint in ws, phrases)
    "truncated": (_bytes(_truncated), ["ckpt.pt", ("state_dict", "cannot be unpickled")]),
    "zero bytes": (_bytes(b""), ["ckpt.pt"]),
    "text": (_bytes(b"not a checkpoint\n"), ["ckpt.pt"]),
    "an npz": (lambda ws: (np.savez(ws / "ckpt.npz", w=np.ones(3)), ws / "ckpt.npz")[1], ["ckpt.npz"]),
    "a directory": (lambda ws: (ws / "ckpt.pt").mkdir() or ws / "ckpt.pt", ["--weights", "directory"]),
    "missing": (lambda ws: ws / "nope.pt", ["nope.pt", "does not exist"]),
    "a FIFO": (lambda ws: (os.mkfifo(ws / "ckpt.pt"), ws / "ckpt.pt")[1], ["ckpt.pt", "FIFO", "not a regular file"]),
    "/dev/zero": (lambda ws: "/dev/zero", ["/dev/zero", "character device"]),
    "wrong shape": (_save(_state("0.weight", torch.zeros(3, 3))), ["ckpt.pt", "0.weight", "shape"]),
    "transposed": (_save(_state("0.weight", lambda v: v.t().contiguous())), ["ckpt.pt", "0.weight", "shape"]),
    "scalar for a matrix": (_save(_state("2.weight", torch.tensor(1.0))), ["ckpt.pt", "2.weight"]),
    "int tensors": (_save(lambda: {k: v.round().to(torch.int64) for k, v in CORPUS.good_state.items()}),
                    ["ckpt.pt", "int64", "0.weight"]),
    "bool tensor": (_save(_state("0.bias", lambda v: v > 0)), ["ckpt.pt", "bool", "0.bias"]),
    "complex tensor": (_save(_state("2.bias", lambda v: v.to(torch.complex64))), ["ckpt.pt", "complex", "2.bias"]),
    "float value": (_save(_state("0.bias", 1.5)), ["ckpt.pt", "0.bias", "float"]),
    "string value": (_save(_state("0.bias", "zeros")), ["ckpt.pt", "0.bias", "str"]),
    "None value": (_save(lambda: {**CORPUS.good_state, "0.bias": None}), ["ckpt.pt", "0.bias"]),
    "list value": (_save(_state("2.bias", [0.0, 1.0, 2.0])), ["ckpt.pt", "2.bias", "list"]),
    "nested under 'model'": (_save(lambda: {"model": CORPUS.good_state}), ["ckpt.pt", "'model'"]),
    "nested by module": (_save(lambda: {"0": {"weight": CORPUS.good_state["0.weight"]}}), ["ckpt.pt", "'0'"]),
    "a list": (_save(lambda: list(CORPUS.good_state.values())), ["ckpt.pt", "list", "state_dict"]),
    "a tensor": (_save(torch.zeros(3)), ["ckpt.pt", "Tensor", "state_dict"]),
    "None": (_save(None), ["ckpt.pt", "NoneType"]),
    "integer keys": (_save(lambda: dict(enumerate(CORPUS.good_state.values()))), ["ckpt.pt", "key"]),
    "empty dict": (_save({}), ["ckpt.pt", "missing keys"]),
    "NaN in an unexpected key": (_save(_state("extra", torch.tensor([float("nan")]))), ["ckpt.pt", "extra"]),
}


@pytest.mark.parametrize("prior", [False, True], ids=["no-outdir", "prior-outdir"])
@pytest.mark.parametrize("case", list(WEIGHT_CASES))
def test_bad_weights(ws, case, prior):
    make, phrases = WEIGHT_CASES[case]
    check(ws, compile_args(ws, None, "--weights", make(ws)), 2, *phrases, prior=prior)


@pytest.mark.parametrize("case", ["truncated", "wrong shape", "int tensors", "float value", "a list"])
def test_bad_weights_with_trust_pickle(ws, case):
    make, phrases = WEIGHT_CASES[case]
    check(ws, compile_args(ws, None, "--weights", make(ws), "--trust-pickle"), 2, *phrases)


MUTATIONS = ["keep", "drop", "shape", "int32", "int64", "bool", "complex64", "float16", "float", "str", "list",
             "none", "nested", "nan"]


def _mutate(value: torch.Tensor, how: str):
    return {"keep": value, "shape": torch.zeros(value.numel() + 1), "int32": value.to(torch.int32),
            "int64": value.to(torch.int64), "bool": value > 0, "complex64": value.to(torch.complex64),
            "float16": value.to(torch.float16), "float": 0.5, "str": "w", "list": value.tolist(), "none": None,
            "nested": {"w": value}, "nan": torch.full_like(value, float("nan"))}[how]


@settings(**EXAMPLES)
@given(plan=st.fixed_dictionaries({k: st.sampled_from(MUTATIONS) for k in ("0.weight", "0.bias", "2.weight",
                                                                           "2.bias")}),
       extra=st.sampled_from([None, "nan", "float", "nested", "keep"]))
def test_mutated_state_dicts(corpus, plan, extra):
    with case_dir(corpus) as ws:
        state = {k: _mutate(v, plan.get(k, "keep")) for k, v in corpus.good_state.items() if plan.get(k) != "drop"}
        if extra:
            state["extra.weight"] = _mutate(corpus.good_state["2.bias"], extra)
        torch.save(state, ws / "ckpt.pt")
        bad = [k for k, how in plan.items() if how not in ("keep", "float16")] + (["extra.weight"] if extra else [])
        args = compile_args(ws, None, "--weights", ws / "ckpt.pt")
        if not bad:  # nothing wrong (float16 is a lossy but valid copy): it compiles
            check(ws, args, 0, changes_ok=("out",))
            return
        check(ws, args, 2, "ckpt.pt", tuple(bad))


# -- npz inputs --------------------------------------------------------------------------------------------------
def _npz(**arrays):
    def make(ws):
        np.savez(ws / "x.npz", **{k: v() if callable(v) else v for k, v in arrays.items()})
        return ws / "x.npz"
    return make


def _raw(data):
    def make(ws):
        (ws / "x.npz").write_bytes(data() if callable(data) else data)
        return ws / "x.npz"
    return make


def _npz_declaring(shape, dtype="<f8", fortran=False, data=b""):
    """An .npz whose 'input' header declares ``shape`` but which holds only ``data``."""
    def make(ws):
        header = {"descr": dtype, "fortran_order": fortran, "shape": shape}
        with zipfile.ZipFile(ws / "x.npz", "w") as z, z.open("input.npy", "w") as f:
            np.lib.format.write_array_header_1_0(f, header)
            f.write(data)
        return ws / "x.npz"
    return make


def _spikes(shape=(4, 3, 12), dtype=np.float64):
    return (np.random.default_rng(0).random(shape) < 0.3).astype(dtype)


def _with(value, at=(1, 2, 5), dtype=np.float64):
    def build():
        x = _spikes(dtype=dtype)
        x[at] = value
        return x
    return build


def _truncated_npz():
    import io
    buf = io.BytesIO()
    np.savez(buf, input=_spikes())
    return buf.getvalue()[: len(buf.getvalue()) // 2]


def _zip_with(name, data):
    def make(ws):
        with zipfile.ZipFile(ws / "x.npz", "w") as z:
            z.writestr(name, data)
        return ws / "x.npz"
    return make


NPZ_CASES = {
    # name: (make the inputs file in ws, phrases)
    "not a zip": (_raw(b"hello, world\n" * 10), ["x.npz"]),
    "zero bytes": (_raw(b""), ["x.npz"]),
    "truncated zip": (_raw(_truncated_npz), ["x.npz"]),
    "an .npy, not an .npz": (lambda ws: (np.save(ws / "x.npy", _spikes()), os.rename(ws / "x.npy", ws / "x.npz"),
                                         ws / "x.npz")[2], ["x.npz"]),
    "a pickle": (lambda ws: ((ws / "x.npz").write_bytes(__import__("pickle").dumps({"input": [1]})), ws / "x.npz")[1],
                 ["x.npz"]),
    "zip without input": (_npz(spikes=_spikes()), ["x.npz", "'input'"]),
    "zip of text": (_zip_with("input.npy", b"not an array"), ["x.npz", "'input'"]),
    "zip of a directory entry": (_zip_with("input.npy/", b""), ["x.npz"]),
    "0-d": (_npz(input=np.float64(1.0)), ["x.npz", "[T, B, ...]"]),
    "1-d": (_npz(input=np.ones(12)), ["x.npz", "[T, B, ...]"]),
    "2-d": (_npz(input=np.ones((4, 12))), ["x.npz", "[T, B, ...]"]),
    "wrong per-step shape": (_npz(input=np.ones((4, 3, 11))), ["x.npz", "per-step shape (11,)"]),
    "extra per-step dim": (_npz(input=np.ones((4, 3, 1, 12))), ["x.npz", "per-step shape (1, 12)"]),
    "NaN": (_npz(input=_with(np.nan)), ["x.npz", "finite"]),
    "Inf": (_npz(input=_with(np.inf)), ["x.npz", "finite"]),
    "-Inf": (_npz(input=_with(-np.inf)), ["x.npz", "finite"]),
    "complex": (_npz(input=lambda: _spikes().astype(np.complex128)), ["x.npz", "complex128"]),
    "strings": (_npz(input=np.array([[["1"] * 12] * 3] * 4)), ["x.npz", "<U1"]),
    "bytes": (_npz(input=np.array([[[b"1"] * 12] * 3] * 4)), ["x.npz", "S1"]),
    "datetime": (_npz(input=np.zeros((4, 3, 12), dtype="datetime64[s]")), ["x.npz", "datetime64"]),
    "structured": (_npz(input=np.zeros((4, 3, 12), dtype=[("a", "f8")])), ["x.npz"]),
    "object array": (lambda ws: _raw(b"")(ws) and _object_npz(ws), ["x.npz", "objects"]),
    "T=0": (_npz(input=np.zeros((0, 3, 12))), ["x.npz", "is empty: shape (0, 3, 12)"]),
    "B=0": (_npz(input=np.zeros((4, 0, 12))), ["x.npz", "is empty: shape (4, 0, 12)"]),
    "per-step dim 0": (_npz(input=np.zeros((4, 3, 0))), ["x.npz", "is empty: shape (4, 3, 0)"]),
    "huge declared header": (_npz_declaring((4, 10_000, 12 * 10_000_000)), ["x.npz", "over the limit"]),
    "negative declared shape": (_npz_declaring((-4, 3, 12)), ["x.npz"]),
    "header larger than data": (_npz_declaring((4, 3, 12), data=b"\0" * 64), ["x.npz"]),
    "header of an unknown dtype": (_npz_declaring((4, 3, 12), dtype="<q9"), ["x.npz"]),
    "a directory": (lambda ws: (ws / "x.npz").mkdir() or ws / "x.npz", ["--inputs", "directory"]),
    "missing": (lambda ws: ws / "nope.npz", ["nope.npz"]),
    "a FIFO": (lambda ws: (os.mkfifo(ws / "x.npz"), ws / "x.npz")[1], ["x.npz", "FIFO", "not a regular file"]),
    "/dev/zero": (lambda ws: "/dev/zero", ["/dev/zero", "character device"]),
}


def _object_npz(ws):
    arr = np.empty((4, 3, 12), dtype=object)
    arr[...] = 1.0
    with zipfile.ZipFile(ws / "x.npz", "w") as z, z.open("input.npy", "w") as f:
        np.lib.format.write_array(f, arr, allow_pickle=True)
    return ws / "x.npz"


@pytest.mark.parametrize("prior", [False, True], ids=["no-outdir", "prior-outdir"])
@pytest.mark.parametrize("case", list(NPZ_CASES))
def test_bad_inputs_file(ws, case, prior):
    make, phrases = NPZ_CASES[case]
    check(ws, compile_args(ws, None, "--inputs", make(ws)), 2, *phrases, prior=prior)


GOOD_INPUTS = {  # unusual but valid layouts and values: each compiles
    "one float64 max": _with(np.finfo(np.float64).max),
    "one int64 max": _with(np.iinfo(np.int64).max, dtype=np.int64),
    "one int64 min": _with(np.iinfo(np.int64).min, dtype=np.int64),
    "one uint64 max": _with(np.iinfo(np.uint64).max, dtype=np.uint64),
    "one tiny subnormal": _with(5e-324),
    "bool": lambda: _spikes(dtype=bool),
    "fortran order": lambda: np.asfortranarray(_spikes()),
    "float16": lambda: _spikes(dtype=np.float16),
    "big-endian": lambda: _spikes().astype(">f8"),
    "uint8 counts": lambda: (_spikes() * 3).astype(np.uint8),
}


@pytest.mark.parametrize("case", list(GOOD_INPUTS))
def test_unusual_but_valid_inputs_compile(ws, case):
    np.savez(ws / "x.npz", input=GOOD_INPUTS[case]())
    check(ws, compile_args(ws, None, "--inputs", ws / "x.npz", "--no-probes"), 0, changes_ok=("out",))
    assert (ws / "out" / "report.json").is_file()
    check(ws, ["verify", ws / "out"], 0)


DTYPES = ["f8", ">f8", "f4", "f2", "i1", "i8", "u8", "?", "c16", "U3", "S2", "M8[s]", "m8[s]", "O"]
SPECIALS = [0.0, 1.0, 2.0, -1.0, 0.5, np.nan, np.inf, -np.inf, 1e300, -1e300, 2.0 ** 62, 255.0]


def _npz_oracle(x: np.ndarray) -> tuple[int, tuple]:
    """(exit code, alternatives the message must name) for compiling one_output on ``x``."""
    if x.dtype.hasobject:
        return 2, ("objects",)
    if x.dtype.kind not in "fiub":
        return 2, (str(x.dtype), "finite numbers")
    if x.ndim < 3:
        return 2, ("[T, B, ...]",)
    if 0 in x.shape:
        return 2, (f"is empty: shape {x.shape}",)
    if x.shape[2:] != (12,):
        return 2, ("per-step shape",)
    if not np.isfinite(x.astype(np.float64)).all():
        return 2, ("finite",)
    if np.abs(x.astype(np.float64)).max(initial=0) > 1e150:  # finite, but the model's output may overflow
        return (0, 2), ("NaN, Inf",)
    return 0, ()


@settings(**{**EXAMPLES, "max_examples": 40})
@given(dtype=st.sampled_from(DTYPES),
       shape=st.lists(st.sampled_from([0, 1, 2, 3, 12]), min_size=0, max_size=4),
       fill=st.lists(st.sampled_from(SPECIALS), min_size=1, max_size=3), prior=st.booleans())
def test_mutated_input_arrays(corpus, dtype, shape, fill, prior):
    with case_dir(corpus) as ws:
        size = int(np.prod(shape))
        values = np.resize(np.array(fill, dtype=np.float64), size).reshape(shape)
        with np.errstate(all="ignore"):
            x = values.astype(np.dtype(dtype)) if dtype != "O" else values.astype(object)
        if dtype == "O":
            with zipfile.ZipFile(ws / "x.npz", "w") as z, z.open("input.npy", "w") as f:
                np.lib.format.write_array(f, x, allow_pickle=True)
        else:
            np.savez(ws / "x.npz", input=x)
        code, phrases = _npz_oracle(x)
        codes = code if isinstance(code, tuple) else (code,)
        args = compile_args(ws, None, "--inputs", ws / "x.npz", "--no-probes")
        check(ws, args, code, lambda got: [] if got == 0 else [phrases] if 0 in codes else ["x.npz", phrases],
              changes_ok=("out",) if 0 in codes else (), prior=prior)


# -- options -----------------------------------------------------------------------------------------------------
OPTION_CASES = {
    # name: (extra args, phrases); MODEL is good unless the args start with a spec
    "--steps 0": (["--steps", "0"], ["--steps"]),
    "--steps -1": (["--steps", "-1"], ["--steps"]),
    "--steps nan": (["--steps", "nan"], ["--steps"]),
    "--steps 1.5": (["--steps", "1.5"], ["--steps"]),
    "--steps huge": (["--steps", str(10 ** 12)], ["over the limit"]),
    "--steps 2**70": (["--steps", str(2 ** 70)], ["over the limit"]),
    "--batch -5": (["--batch", "-5"], ["--batch"]),
    "--batch huge": (["--batch", str(10 ** 15)], ["over the limit"]),
    "--batch empty": (["--batch", ""], ["--batch"]),
    "--seed -1": (["--seed", "-1"], ["--seed", "-1"]),
    "--seed nan": (["--seed", "nan"], ["--seed"]),
    "--seed 1e3": (["--seed", "1e3"], ["--seed"]),
    "--dt nan": (["--dt", "nan"], ["--dt"]),
    "--dt inf": (["--dt", "inf"], ["--dt"]),
    "--dt -1": (["--dt", "-1"], ["--dt"]),
    "--dt 0": (["--dt", "0"], ["--dt"]),
    "--dt text": (["--dt", "fast"], ["--dt"]),
    "--ttfs-dt nan": (["--coding", "ttfs", "--ttfs-dt", "nan"], ["--ttfs-dt"]),
    "--ttfs-dt inf": (["--coding", "ttfs", "--ttfs-dt", "inf"], ["--ttfs-dt"]),
    "--coding garbage": (["--coding", "morse"], ["--coding"]),
    "--nir-scheme garbage": (["--nir-scheme", "loihi"], ["--nir-scheme"]),
    "--passes empty": (["--passes", ""], ["pass"]),
    "--passes commas": (["--passes", ",,,"], ["pass"]),
    "--passes unknown": (["--passes", "fold_batchnorm,rm -rf"], ["rm -rf"]),
    "--passes default,": (["--passes", "default,"], ["default"]),
    "--target empty": (["--target", ""], ["target ''"]),
    "--target path": (["--target", "../../etc"], ["'../../etc'"]),
    "--target dunder": (["--target", "__init__"], ["'__init__'"]),
    "--target case": (["--target", "ONNX"], ["'ONNX'"]),
    "--input-shape empty": (["--input-shape", ""], ["--input-shape"]),
    "--input-shape 0": (["--input-shape", "0"], ["--input-shape"]),
    "--input-shape -12": (["--input-shape", "-12"], ["--input-shape"]),
    "--input-shape 1,,2": (["--input-shape", "1,,2"], ["--input-shape"]),
    "--input-shape 12.0": (["--input-shape", "12.0"], ["--input-shape"]),
    "--input-shape contradicts": (["--input-shape", "3,4"], ["--input-shape", "(12,)"]),
    "--input-shape huge, no declared shape": ((lambda ws: [model(ws, "no_shape"), "--input-shape",
                                                           "100000,100000,100000"]), ["over the limit"]),
    "--input-shape wrong, no declared shape": ((lambda ws: [model(ws, "no_shape"), "--input-shape", "5"]),
                                               ["'0'", ("12", "5")]),
    "--max-input-bytes 0": (["--max-input-bytes", "0"], ["--max-input-bytes"]),
    "--max-input-bytes 1": (["--max-input-bytes", "1"], ["over the limit"]),
    "--weights empty": (["--weights", ""], ["--weights"]),
    "--inputs empty": (["--inputs", ""], ["--inputs"]),
    "unknown option": (["--frobnicate"], ["--frobnicate"]),
}


@pytest.mark.parametrize("case", list(OPTION_CASES))
def test_bad_option(ws, case):
    extra, phrases = OPTION_CASES[case]
    extra = extra(ws) if callable(extra) else [model(ws), *extra]
    check(ws, ["compile", *extra, "-o", ws / "out"], 2, *phrases)


def test_dt_on_a_nir_model_is_validated(ws):
    """--dt reaches the NIR frontend only for a .nir MODEL: give it one (the good model, compiled to NIR)."""
    pytest.importorskip("nir")
    done = cli("compile", model(ws), "--target", "nir", "-o", ws / "nirout")
    assert done.exit_code == 0, done.output
    shutil.copy(ws / "nirout" / "model.nir", ws / "m.nir")
    for dt in ("nan", "inf", "1e308"):
        check(ws, ["compile", ws / "m.nir", "--dt", dt, "-o", ws / "out"], 2, ("--dt", "dt = 1e+308"))


def _shape_oracle(text: str):
    try:
        dims = tuple(int(v) for v in text.split(","))
    except ValueError:
        return 2, ("--input-shape",)
    if not dims or any(d < 1 for d in dims):
        return 2, ("--input-shape",)
    return (0, ()) if dims == (12,) else (2, ("--input-shape", "input_shape"))


@settings(**EXAMPLES)
@given(option=st.sampled_from(["--passes", "--target", "--input-shape", "--seed", "--steps", "--batch"]),
       value=st.one_of(st.lists(st.sampled_from(list("0129,.-+ _xüé\t") + ["nan", "inf", "e", "none", "default",
                                                                            "fold_batchnorm", "onnx", "12"]),
                                max_size=6).map("".join),
                       st.integers(-2 ** 80, 2 ** 80).map(str), st.integers(-3, 300).map(str)),
       prior=st.booleans())
def test_mutated_option_values(corpus, option, value, prior):
    with case_dir(corpus) as ws:
        # a fixed input limit: --steps or --batch above 260 is refused whatever memory the machine has
        args = compile_args(ws, None, option, value, "--no-probes", "--max-input-bytes", 100_000)
        if option == "--passes":
            names = [n.strip() for n in value.split(",") if n.strip()]
            ok = value in ("default", "none") or (names and set(names) <= {"fold_batchnorm", "fuse_repconv",
                                                                              "tdm_dual_kernel",
                                                                              "unroll_virtual_steps",
                                                                              "reassociate_attention"})
            expected = (0, ()) if ok else (2, ("unknown pass",))
        elif option == "--target":
            names = value.split(",")  # none, all, or distinct target names (lava,nir,onnx)
            ok = value in ("none", "all") or (set(names) <= {"onnx", "nir", "lava"} and len(set(names)) == len(names))
            expected = (0, ()) if ok else (2, (repr(value),))
        elif option == "--input-shape":
            expected = _shape_oracle(value)
        else:
            try:
                n = int(value)
            except ValueError:
                n = None
            if n is None or (option != "--seed" and n < 1) or (option == "--seed" and n < 0):
                expected = (2, (option,))
            elif option != "--seed" and n * 4 * 12 * 8 > 100_000:
                expected = (2, ("over the limit",))
            else:
                expected = (0, ())
        code, phrases = expected
        check(ws, args, code, *([phrases] if code else []), changes_ok=("out",) if code == 0 else (), prior=prior)


# -- OUTDIR ------------------------------------------------------------------------------------------------------
def _symlink_to(target):
    def make(ws):
        t = target(ws)
        (ws / "link").symlink_to(t)
        return ws / "link"
    return make


def _read_only_parent(ws):
    if os.geteuid() == 0:
        pytest.skip("running as root: a read-only directory is still writable, so this cannot fail")
    (ws / "ro").mkdir()
    (ws / "ro").chmod(0o555)
    return ws / "ro" / "out"


def _marked(ws, make_marker):
    """A non-empty directory whose .spikec marker ``make_marker`` makes: OUTDIR may replace it only if it is spikec's."""
    (ws / "fake").mkdir()
    (ws / "fake" / "thesis.tex").write_text("years of work\n")
    make_marker(ws / "fake" / ".spikec")
    return ws / "fake"


OUTDIR_CASES = {
    # name: (OUTDIR from ws, phrases)
    "a file": (lambda ws: ((ws / "f").write_text("keep\n"), ws / "f")[1], [("not a directory", "is a file")]),
    "a symlink to an empty dir": (_symlink_to(lambda ws: (ws / "empty").mkdir() or ws / "empty"),
                                  ["symbolic link"]),
    "a symlink to a good OUTDIR": (_symlink_to(lambda ws: shutil.copytree(CORPUS.good, ws / "g")), ["symbolic link"]),
    "a dangling symlink": (_symlink_to(lambda ws: ws / "nowhere"), ["symbolic link"]),
    "a symlink loop": (lambda ws: (os.symlink(ws / "loop", ws / "loop"), ws / "loop")[1], ["loop"]),
    "a fifo": (lambda ws: (os.mkfifo(ws / "fifo"), ws / "fifo")[1], ["not a directory"]),
    "a foreign non-empty dir": (lambda ws: ((ws / "mine").mkdir(), (ws / "mine" / "thesis.tex").write_text("x"),
                                            ws / "mine")[2], ["did not write"]),
    "a dir with a fake marker": (lambda ws: ((ws / "fake").mkdir(), (ws / "fake" / ".spikec").write_text("{}"),
                                             ws / "fake")[2], ["did not write"]),
    "a dir with a garbage marker": (lambda ws: ((ws / "fake").mkdir(), (ws / "fake" / ".spikec").write_text("[["),
                                                ws / "fake")[2], ["did not write"]),
    "a dir with a marker of version 999": (lambda ws: _marked(ws, lambda m: m.write_text(
        '{"format": "spikec-outdir", "version": 999}')), ["did not write", "version 999"]),
    "a dir with a marker linked to a good OUTDIR's": (lambda ws: _marked(ws, lambda m: m.symlink_to(
        CORPUS.good / ".spikec")), ["did not write", "symbolic link"]),
    "a dir with a FIFO marker": (lambda ws: _marked(ws, os.mkfifo), ["did not write", "FIFO"]),
    "the model's folder": (lambda ws: ws, ["the current directory"]),
    "the model's folder, via ..": (lambda ws: ws / "sub" / "..", ["the current directory"]),
    "'.'": (lambda ws: ".", ["the current directory"]),
    "''": (lambda ws: "", ["empty path"]),
    "' '": (lambda ws: " ", ["empty path"]),
    "'/'": (lambda ws: "/", ["'/'"]),
    "the model file": (lambda ws: ws / "model.py", [("model.py", "not a directory")]),
    "under a file": (lambda ws: ((ws / "f").write_text("keep\n"), ws / "f" / "out")[1], ["f"]),
    "under a file, deeper": (lambda ws: ((ws / "f").write_text("keep\n"), ws / "f" / "a" / "b")[1], ["f"]),
    "a read-only parent": (_read_only_parent, ["ro"]),
    "too long a name": (lambda ws: ws / ("x" * 300), [("File name too long", "x" * 50)]),
}


@pytest.mark.parametrize("case", list(OUTDIR_CASES))
def test_bad_outdir(ws, case):
    make, phrases = OUTDIR_CASES[case]
    check(ws, ["compile", model(ws), "-o", make(ws)], 2, *phrases)


@pytest.mark.parametrize("where", ["compile -o", "verify", "--weights", "--inputs"])
def test_nul_byte_in_a_path_option(ws, where):
    nul = f"{ws}/o\x00ut"
    args = {"compile -o": ["compile", model(ws), "-o", nul], "verify": ["verify", nul],
            "--weights": ["compile", model(ws), "--weights", nul, "-o", ws / "out"],
            "--inputs": ["compile", model(ws), "--inputs", nul, "-o", ws / "out"]}[where]
    check(ws, args, 2, ("NUL", "null byte"))


@pytest.mark.parametrize("option", ["--weights", "--inputs"])
def test_a_path_too_long(ws, option):
    check(ws, ["compile", model(ws), option, ws / ("x" * 300), "-o", ws / "out"], 2, "x" * 50)


def test_outdir_is_the_weights_or_inputs_file(ws):
    torch.save(CORPUS.good_state, ws / "w.pt")
    np.savez(ws / "x.npz", input=_spikes())
    for target in (ws / "w.pt", ws / "x.npz"):
        check(ws, ["compile", model(ws), "--weights", ws / "w.pt", "--inputs", ws / "x.npz", "-o", target], 2,
              target.name)


# -- verify on tampered OUTDIRs ----------------------------------------------------------------------------------
def _json_edit(name, fn):
    def tamper(out):
        path = out / name
        doc = json.loads(path.read_text())
        new = fn(doc)
        path.write_text(new if isinstance(new, str) else json.dumps(new))
    return tamper


def _write(name, data):
    def tamper(out):
        p = out / name
        if data is None:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
        else:
            p.write_bytes(data(out) if callable(data) else data)
    return tamper


def _report(**changes):
    def fn(doc):
        for k, v in changes.items():
            if v is _DROP:
                doc.pop(k, None)
            else:
                doc[k] = v
        return doc
    return _json_edit("report.json", fn)


def _options(**changes):
    return _json_edit("report.json", lambda doc: {**doc, "options": {**doc["options"], **changes}})


def _node(index, **changes):
    def fn(doc):
        node = doc["nodes"][index]
        for k, v in changes.items():
            if v is _DROP:
                node.pop(k, None)
            else:
                node[k] = v(node) if callable(v) else v
        return doc
    return _json_edit("graph.json", fn)


def _arrays(name, fn):
    def tamper(out):
        with np.load(out / name) as z:
            arrays = {k: z[k] for k in z.files}
        arrays = fn(arrays)
        if any(np.asarray(v).dtype.hasobject for v in arrays.values()):
            with zipfile.ZipFile(out / name, "w") as zf:
                for k, v in arrays.items():
                    with zf.open(f"{k}.npy", "w") as f:
                        np.lib.format.write_array(f, np.asarray(v), allow_pickle=True)
        else:
            np.savez(out / name, **arrays)
    return tamper


def _set(key, value):
    return lambda arrays: {**arrays, key: value(arrays[key]) if callable(value) else value}


def _drop(key):
    return lambda arrays: {k: v for k, v in arrays.items() if k != key}


def _first_weight(arrays):
    return next(k for k in arrays if k.endswith("/weight"))


def _weights(fn):
    return _arrays("weights.npz", lambda a: fn(a, _first_weight(a)))


_DROP = object()
DEEP = "[" * 100_000 + "]" * 100_000

VERIFY_CASES = {
    # name: (tamper(out), exit code, phrases)
    "report.json not JSON": (_write("report.json", b"{not json"), 2, ["report.json"]),
    "report.json empty": (_write("report.json", b""), 2, ["report.json"]),
    "report.json a list": (_write("report.json", b"[1, 2]"), 2, ["report.json", "JSON object"]),
    "report.json deeply nested": (_write("report.json", DEEP.encode()), 2, ["report.json"]),
    "report.json binary": (_write("report.json", bytes(range(256))), 2, ["report.json"]),
    "report.json missing": (_write("report.json", None), 2, ["report.json"]),
    "report.json {}": (_write("report.json", b"{}"), 2, ["report.json", "factory"]),
    "report without provenance": (_report(provenance=_DROP), 2, ["report.json", "factory"]),
    "report provenance a list": (_report(provenance=[1]), 2, ["report.json", "provenance"]),
    "report factory os.system": (_report(provenance={"factory": "os.system"}), 2, ["'os.system'"]),
    "report factory not in model.py": (_report(provenance={"factory": "getcwd"}), 2, ["getcwd"]),
    "report factory 5": (_report(provenance={"factory": 5}), 2, ["factory", "5"]),
    "report without options": (_report(options=_DROP), 0, []),
    "report options a list": (_report(options=[1]), 2, ["report.json", "options"]),
    "option passes 5": (_options(passes=5), 2, ["'passes'"]),
    "option passes null": (_options(passes=None), 2, ["'passes'"]),
    "option passes garbage": (_options(passes="fold_everything"), 2, ["fold_everything"]),
    "option seed text": (_options(seed="0"), 2, ["'seed'"]),
    "option seed true": (_options(seed=True), 2, ["'seed'"]),
    "option seed -1": (_options(seed=-1), 2, ["seed", "-1"]),
    "option target list": (_options(target=["onnx"]), 2, ["'target'"]),
    "option target unknown": (_options(target="loihi9"), 2, ["loihi9"]),
    "option coding unknown": (_options(coding="morse"), 2, ["'coding'", "morse"]),
    "option nir_scheme unknown": (_options(nir_scheme="loihi"), 2, ["'nir_scheme'", "loihi"]),
    "option nir_dt text": (_options(nir_dt="fast"), 2, ["'nir_dt'"]),
    "option nir_dt negative": (_options(nir_dt=-1.0), 2, ["report.json", "--dt -1.0"]),
    "option ttfs_dt a dict": (_options(ttfs_dt={"a": 1}), 2, ["'ttfs_dt'"]),
    "option allow_unstable 1": (_options(allow_unstable=1), 2, ["'allow_unstable'"]),
    "report claims a missing target": (_report(target={"name": "onnx", "emitted": True}), 1,
                                       ["FAILED", "model.onnx"]),
    "graph.json missing": (_write("graph.json", None), 2, ["graph.json"]),
    "graph.json truncated": (lambda out: (out / "graph.json").write_text((out / "graph.json").read_text()[:300]), 2,
                             ["graph.json"]),
    "graph.json a list": (_write("graph.json", b"[]"), 2, ["graph.json"]),
    "graph.json a string": (_write("graph.json", b'"spikec-ir"'), 2, ["graph.json"]),
    "graph.json deeply nested": (_write("graph.json", DEEP.encode()), 2, ["graph.json"]),
    "graph.json wrong format": (_json_edit("graph.json", lambda d: {**d, "format": "onnx"}), 2, ["'onnx'"]),
    "graph.json version 3": (_json_edit("graph.json", lambda d: {**d, "version": 3}), 2, ["version=3"]),
    "graph.json without nodes": (_json_edit("graph.json", lambda d: {k: v for k, v in d.items() if k != "nodes"}),
                                 2, ["graph.json", "nodes"]),
    "graph.json nodes a dict": (_json_edit("graph.json", lambda d: {**d, "nodes": {"a": 1}}), 2,
                                ["graph.json", "nodes"]),
    "graph.json a node is a list": (_json_edit("graph.json", lambda d: {**d, "nodes": [[1, 2]] + d["nodes"]}), 2,
                                    ["graph.json", "node"]),
    "graph.json outputs a string": (_json_edit("graph.json", lambda d: {**d, "outputs": "2"}), 2,
                                    ["graph.json", "outputs"]),
    "graph.json no outputs": (_json_edit("graph.json", lambda d: {**d, "outputs": []}), 2, ["no outputs"]),
    "graph.json unknown output": (_json_edit("graph.json", lambda d: {**d, "outputs": ["ghost"]}), 2, ["'ghost'"]),
    "node with unknown op": (_node(1, op="teleport"), 2, ["'teleport'"]),
    "node op null": (_node(1, op=None), 2, ["op"]),
    "node without type": (_node(1, type=_DROP), 2, ["type"]),
    "node type garbage": (_node(1, type="binary"), 2, ["type"]),
    "node shape negative": (_node(1, type=lambda n: {**n["type"], "shape": [-1]}), 2, ["shape"]),
    "node shape text": (_node(1, type=lambda n: {**n["type"], "shape": "abc"}), 2, ["shape"]),
    "node shape float": (_node(1, type=lambda n: {**n["type"], "shape": [16.5]}), 2, ["shape"]),
    "node kind unknown": (_node(1, type=lambda n: {**n["type"], "kind": "ternary"}), 2, ["'ternary'"]),
    "node ceiling text": (_node(2, type=lambda n: {**n["type"], "kind": "integer", "ceiling": "3"}), 2,
                          ["ceiling"]),
    "node attrs a list": (_node(2, attrs=[1, 2]), 2, ["attrs"]),
    "a neuron without its reset": (_node(2, attrs={}), 2, ["graph.json", "'reset'"]),
    "node attrs garbage values": (_node(2, attrs=lambda n: {k: "x" for k in n["attrs"]}), 2, ["'1'", "'reset'"]),
    "node name with a slash": (_node(1, name="a/b"), 2, ["'a/b'"]),
    "node name not a string": (_node(1, name=5), 2, ["name"]),
    "node inputs a string": (_node(1, inputs="input"), 2, ["inputs"]),
    "node params a dict": (_node(1, params={"weight": 1}), 2, ["params"]),
    "node param not in weights.npz": (_node(1, params=lambda n: n["params"] + ["ghost"]), 2, ["ghost"]),
    "a cycle": (_json_edit("graph.json", lambda d: {**d, "nodes": [{**n, "inputs": [d["nodes"][-1]["name"]]}
                                                                   if i == 1 else n
                                                                   for i, n in enumerate(d["nodes"])]}), 2,
                ["cycle"]),
    "a missing input": (_node(1, inputs=["ghost"]), 2, ["'ghost'"]),
    "duplicate node names": (_json_edit("graph.json", lambda d: {**d, "nodes": d["nodes"] + [d["nodes"][-1]]}), 2,
                             ["two nodes"]),
    "a neuron's reset changed": (_node(2, attrs=lambda n: {**n["attrs"], "reset": "zero"}), 1, ["FAILED"]),
    "weights.npz missing": (_write("weights.npz", None), 2, ["weights.npz"]),
    "weights.npz not a zip": (_write("weights.npz", b"garbage" * 10), 2, ["weights.npz"]),
    "weights.npz truncated": (lambda out: _write("weights.npz", (out / "weights.npz").read_bytes()[:500])(out), 2,
                              ["weights.npz"]),
    "weights.npz an array missing": (_weights(lambda a, k: {x: v for x, v in a.items() if x != k}), 2,
                                     [("weights.npz", "weight")]),
    "weights.npz wrong shape": (_weights(lambda a, k: {**a, k: a[k][:, :-1]}), 2, ["weight"]),
    "weights.npz float32": (_weights(lambda a, k: {**a, k: a[k].astype(np.float32)}), 2, ["float32", "weight"]),
    "weights.npz complex": (_weights(lambda a, k: {**a, k: a[k].astype(np.complex128)}), 2, ["complex128"]),
    "weights.npz object array": (_weights(lambda a, k: {**a, k: a[k].astype(object)}), 2, ["weights.npz"]),
    "weights.npz NaN": (_weights(lambda a, k: {**a, k: np.full_like(a[k], np.nan)}), 2, ["NaN or Inf"]),
    "weights.npz values changed": (_weights(lambda a, k: {**a, k: a[k] * 1.5}), 1, ["FAILED"]),
    "io.npz missing": (_write("io.npz", None), 2, ["io.npz"]),
    "io.npz not a zip": (_write("io.npz", b"garbage"), 2, ["io.npz"]),
    "io.npz without input": (_arrays("io.npz", _drop("input")), 2, ["io.npz", "'input'"]),
    "io.npz input 2-d": (_arrays("io.npz", _set("input", lambda x: x[0])), 2, ["io.npz", "[T, B, ...]"]),
    "io.npz input wrong per-step shape": (_arrays("io.npz", _set("input", lambda x: x[..., :-1])), 2,
                                          ["io.npz", "per-step shape"]),
    "io.npz input T=0": (_arrays("io.npz", _set("input", lambda x: x[:0])), 2, ["io.npz", "is empty: shape (0,"]),
    "io.npz input NaN": (_arrays("io.npz", _set("input", lambda x: x * np.nan)), 2, ["io.npz", "finite"]),
    "io.npz input objects": (_arrays("io.npz", _set("input", lambda x: x.astype(object))), 2, ["io.npz", "objects"]),
    "io.npz input strings": (_arrays("io.npz", _set("input", lambda x: x.astype(str))), 2, ["io.npz"]),
    "io.npz input float32": (_arrays("io.npz", _set("input", lambda x: x.astype(np.float32))), 0, []),
    "io.npz without output": (_arrays("io.npz", _drop("output")), 1, ["FAILED", "outputs"]),
    "io.npz output wrong shape": (_arrays("io.npz", _set("output", lambda x: x[:, :, :-1])), 1, ["FAILED"]),
    "io.npz output objects": (_arrays("io.npz", _set("output", lambda x: x.astype(object))), 2, ["io.npz",
                                                                                                 "objects"]),
    "io.npz output strings": (_arrays("io.npz", _set("output", lambda x: x.astype(str))), 2, ["io.npz", "output"]),
    "io.npz output NaN": (_arrays("io.npz", _set("output", lambda x: x * np.nan)), 1, ["FAILED", "nan"]),
    "io.npz an extra output": (_arrays("io.npz", lambda a: {**a, "output1": a["output"]}), 1, ["FAILED",
                                                                                            "outputs"]),
    "io.npz output changed": (_arrays("io.npz", _set("output", lambda x: x + 1.0)), 1, ["FAILED", "first mismatch"]),
    ".spikec missing": (_write(".spikec", None), 2, [".spikec"]),
    ".spikec garbage": (_write(".spikec", b"\xff\xfe"), 2, [".spikec"]),
    "source/ missing": (_write("source", None), 2, ["source/model.py"]),
    "source/model.py missing": (_write("source/model.py", None), 2, ["source/model.py"]),
    "source/model.py a syntax error": (_write("source/model.py", b"def good(:\n"), 2, ["model.py", "SyntaxError"]),
    "source/model.py exits": (_write("source/model.py", b"import sys\nsys.exit(4)\n"), 2, ["sys.exit(4)"]),
    "source/model.py another model": (_write("source/model.py", MODELS.replace("nn.Linear(16, 3))",
                                                                               "nn.Linear(16, 3), nn.ReLU())")
                                             .encode()), 1, ["FAILED"]),
    "source/weights.pt garbage": (_write("source/weights.pt", b"garbage"), 2, ["weights.pt"]),
    "source/weights.pt empty": (_write("source/weights.pt", b""), 2, ["weights.pt"]),
    "source/weights.pt a directory": (lambda out: ((out / "source" / "weights.pt").unlink(),
                                                   (out / "source" / "weights.pt").mkdir()), 2, ["weights.pt"]),
    "source/weights.pt other values": (lambda out: torch.save({k: v + 0.25 for k, v in CORPUS.good_state.items()},
                                                              out / "source" / "weights.pt"), 1, ["FAILED"]),
    "source/weights.pt wrong shapes": (lambda out: torch.save({k: v[:1] if v.dim() else v
                                                               for k, v in CORPUS.good_state.items()},
                                                              out / "source" / "weights.pt"), 2,
                                       ["weights.pt", "shape"]),
    "source/weights.pt int tensors": (lambda out: torch.save({k: v.to(torch.int32)
                                                              for k, v in CORPUS.good_state.items()},
                                                             out / "source" / "weights.pt"), 2,
                                      ["weights.pt", "int32"]),
    # a target artifact OUTDIR did not have: verify re-checks it whatever the report says (the ONNX verifier
    # reports a file that does not parse as a failed check; the others cannot open theirs: malformed)
    "a garbage model.onnx": (_write("model.onnx", b"garbage"), 1, ["FAILED", "model.onnx"]),
    "a garbage model.nir": (_write("model.nir", b"garbage"), 2, ["model.nir"]),
    "a garbage lava/network.json": (lambda out: ((out / "lava").mkdir(), (out / "lava" / "network.json")
                                                 .write_text("{")), 2, ["lava"]),
    # an OUTDIR is a file people send each other: nothing in it is read through a link or from a special file
    "graph.json a link to a copy outside": (lambda out: _linked(out, "graph.json"), 2,
                                            ["graph.json", "symbolic link"]),
    "io.npz a link to /dev/zero": (lambda out: ((out / "io.npz").unlink(), (out / "io.npz").symlink_to("/dev/zero")),
                                   2, ["io.npz", "symbolic link", "/dev/zero"]),
    "source/model.py a link": (lambda out: _linked(out, "source/model.py"), 2, ["model.py", "symbolic link"]),
    "report.json a FIFO": (lambda out: ((out / "report.json").unlink(), os.mkfifo(out / "report.json")), 2,
                           ["report.json", "FIFO"]),
    "report.json over its size limit": (lambda out: os.truncate(out / "report.json", 65 << 20), 2,
                                        ["report.json", "over the limit of 67,108,864 bytes"]),
    ".spikec version 999": (_write(".spikec", b'{"format": "spikec-outdir", "version": 999}'), 2,
                            [".spikec", "version 999"]),
    ".spikec a link to a good OUTDIR's": (lambda out: ((out / ".spikec").unlink(),
                                                       (out / ".spikec").symlink_to(CORPUS.good / ".spikec")), 2,
                                          [".spikec", "symbolic link"]),
    "a model.nir whose weight is an external link": (lambda out: _nir_pointing_outside(out), 2,
                                                     ["model.nir", "external link", "/weight'"]),
    "a planted source/sklearn.py": (_write("source/sklearn.py", b"raise SystemExit(9)\n"), 2,
                                    ["sklearn.py", "installed module 'sklearn'"]),
    "a planted source/torch package": (lambda out: ((out / "source" / "torch").mkdir(),
                                                    (out / "source" / "torch" / "__init__.py").write_text("")), 2,
                                       ["torch", "installed module 'torch'"]),
}
# run with --run-source: they are about the model code OUTDIR carries (without it, none of it runs)
RUN_SOURCE = {name for name in VERIFY_CASES if name.startswith(("report factory", "source/", "a planted"))
              and "a link" not in name} | {"report.json {}", "report without provenance"}


def _nir_pointing_outside(out):
    """A NIR file whose weight is an HDF5 external link to a file beside OUTDIR (nir.read would follow it)."""
    import h5py
    import nir
    nir.write(out / "model.nir", nir.NIRGraph.from_list(nir.Affine(np.ones((3, 12)), np.zeros(3))))
    with h5py.File(out.parent / "secret.h5", "w") as f:
        f["data"] = np.full((3, 12), 7.0)
    with h5py.File(out / "model.nir", "r+") as f:
        found = []
        f.visit(lambda name: found.append(name) if name.endswith("/weight") else None)
        del f[found[0]]
        f[found[0]] = h5py.ExternalLink(str(out.parent / "secret.h5"), "/data")


def _linked(out, name):
    """``name`` replaced by a symbolic link to an identical copy outside OUTDIR (valid content, still refused)."""
    copy = out.parent / f"outside-{name.replace('/', '-')}"
    shutil.copy(out / name, copy)
    (out / name).unlink()
    (out / name).symlink_to(copy)


@pytest.mark.parametrize("case", list(VERIFY_CASES))
def test_verify_tampered_outdir(ws, case):
    tamper, code, phrases = VERIFY_CASES[case]
    out = ws / "out"
    shutil.copytree(CORPUS.good, out)
    tamper(out)
    # verify writes nothing: ws, OUTDIR included, is unchanged
    check(ws, ["verify", out, *(["--run-source"] if case in RUN_SOURCE else [])], code, *phrases)


@pytest.mark.parametrize("case", sorted(RUN_SOURCE))
def test_verify_runs_no_tampered_source_by_default(ws, case):
    tamper = VERIFY_CASES[case][0]
    out = ws / "out"
    shutil.copytree(CORPUS.good, out)
    tamper(out)
    check(ws, ["verify", out], 0, "NOT RUN", ("--run-source", "--model"))  # the IR and io.npz still check out


VERIFY_TARGETS = {
    "no OUTDIR": (lambda ws: ws / "nope", ["nope"]),
    "a file": (lambda ws: ((ws / "f").write_text("x"), ws / "f")[1], ["f"]),
    "an empty dir": (lambda ws: (ws / "e").mkdir() or ws / "e", [".spikec"]),
    "the model's folder": (lambda ws: ws, [".spikec"]),
    "''": (lambda ws: "", [("''", ".spikec")]),
}


@pytest.mark.parametrize("case", list(VERIFY_TARGETS))
def test_verify_not_an_outdir(ws, case):
    make, phrases = VERIFY_TARGETS[case]
    check(ws, ["verify", make(ws)], 2, *phrases)


@pytest.mark.parametrize("case", ["2-d", "wrong per-step shape", "NaN", "T=0", "not a zip", "object array"])
def test_verify_with_bad_inputs_file(ws, case):
    shutil.copytree(CORPUS.good, ws / "out")
    make, phrases = NPZ_CASES[case]
    check(ws, ["verify", ws / "out", "--inputs", make(ws)], 2, *phrases)


def test_verify_with_bad_model_and_weights(ws):
    shutil.copytree(CORPUS.good, ws / "out")
    check(ws, ["verify", ws / "out", "--model", model(ws, "returns_dict")], 2, "Returns")
    make, phrases = WEIGHT_CASES["wrong shape"]
    check(ws, ["verify", ws / "out", "--model", model(ws), "--weights", make(ws)], 2, *phrases)
    check(ws, ["verify", ws / "out", "--run-source", "--weights", make(ws)], 2, *phrases)
    check(ws, ["verify", ws / "out", "--weights", make(ws)], 2, "--weights", "--run-source")


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=True)
                           | st.text(max_size=6),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                       max_size=3),
                           max_leaves=6)


@settings(**{**EXAMPLES, "max_examples": 40})
@given(key=st.sampled_from(["passes", "target", "seed", "nir_dt", "nir_scheme", "coding", "ttfs_dt",
                            "allow_unstable"]),
       value=JSON_VALUES)
def test_mutated_report_options(corpus, key, value):
    with case_dir(corpus) as ws:
        out = ws / "out"
        shutil.copytree(corpus.good, out)
        _options(**{key: value})(out)
        named = [] if _valid_value(key, value) else [repr(key)]
        check(ws, ["verify", out], (0, 2), lambda code: named if code == 2 else [])


def _valid_value(key, value) -> bool:
    """A value of the right type: then the message may name the value's own problem instead of the key."""
    defaults = {"passes": str, "target": str, "seed": int, "nir_dt": float, "nir_scheme": str, "coding": str,
                "ttfs_dt": (int, float, type(None)), "allow_unstable": bool}
    return isinstance(value, defaults[key]) and (key == "allow_unstable" or not isinstance(value, bool))


FIELDS = ["name", "op", "inputs", "type", "attrs", "params", "scope"]


@settings(**{**EXAMPLES, "max_examples": 40})
@given(node=st.integers(0, 3), field=st.sampled_from(FIELDS), value=JSON_VALUES)
def test_mutated_graph_json(corpus, node, field, value):
    with case_dir(corpus) as ws:
        out = ws / "out"
        shutil.copytree(corpus.good, out)
        doc = json.loads((out / "graph.json").read_text())
        index = node % len(doc["nodes"])
        doc["nodes"][index][field] = value
        (out / "graph.json").write_text(json.dumps(doc))
        check(ws, ["verify", out], (0, 1, 2), lambda code: [("IR", "graph.json", "weights.npz")] if code == 2 else [])
