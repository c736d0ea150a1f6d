#!/usr/bin/env python
"""Mutation testing: how many seeded one-line bugs the test suite and the runtime checks kill.

    .venv/bin/python tools/mutation.py                  # every mutant, tests + runtime checks
    .venv/bin/python tools/mutation.py --list           # the mutants (tools/mutants.py)
    .venv/bin/python tools/mutation.py --only ID[,ID] --kind pass --no-runtime --jobs 2
    .venv/bin/python tools/mutation.py --set blind-spots --exclude-tests '*blind_spots*'   # killed before them?

The repository's files (``git ls-files`` plus untracked, not ignored files; no .venv, build, .git) are
copied once into a private temporary directory per job, so nothing in the working tree is ever modified
and the run sees one consistent snapshot. In that copy, for each mutant: the original text is replaced
(it must occur exactly once), its test files run with ``pytest -x -q -p no:cacheprovider`` under a timeout
(``killed``: a test failed or the mutant broke collection; ``survived``; ``timeout``), and for a *semantic*
pass mutant ``spikec compile`` runs on the shipped examples until one exits non-zero (``caught``: 1 = not
equivalent, anything else = crash or refusal) or none does (``missed``). Then the file is restored.

Before any mutant, a baseline runs every selected test file and every example on the unmutated copy:
tests that already fail there are deselected for the mutants (and listed), examples that fail are
dropped; the baseline durations set each mutant's timeouts. ``PYTHONPATH`` points at the copy (the
editable install's finder comes after it) and no bytecode is written, so a restored file is never
shadowed by a stale ``.pyc``.

Printed last: the tests' kill rate (target >= 95%, a timeout counts as killed) and the runtime catch
rate of semantic pass mutants (target 100%). Exit 0 when both targets are met, 1 when not, 2 when the
run could not be set up (a mutant's text not found, a broken baseline).
"""
import argparse
import concurrent.futures
import dataclasses
import fnmatch
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_TARGET, RUNTIME_TARGET = 95.0, 100.0
SKIP_DIRS = {".venv", "build", ".git", "__pycache__", ".hypothesis", ".pytest_cache"}

# The shipped examples the runtime check compiles (README "Examples", tests/examples/): MODEL and options.
EXAMPLES = {
    "rules": ["examples/rules/model.py:rules", "--inputs", "examples/rules/inputs.npz"],
    "digits": ["examples/digits/model.py:small", "--weights", "examples/digits/checkpoint.pt",
               "--inputs", "examples/digits/inputs.npz"],
    "sdt": ["examples/sdt/model.py:small", "--weights", "examples/sdt/checkpoint.pt",
            "--inputs", "examples/sdt/inputs.npz"],
    "ripe": ["examples/ripe/model.py:small", "--weights", "examples/ripe/checkpoint.pt",
             "--inputs", "examples/ripe/inputs.npz"],
    "sdna-static-linear": ["examples/sdna/model.py:static_linear", "--weights", "examples/sdna/static.pt",
                           "--inputs", "examples/sdna/inputs_static.npz"],
    "sdna-static-pairwise": ["examples/sdna/model.py:static_pairwise", "--weights", "examples/sdna/static.pt",
                             "--inputs", "examples/sdna/inputs_static.npz"],
    "sdna-event-linear": ["examples/sdna/model.py:event_linear", "--weights", "examples/sdna/event.pt",
                          "--inputs", "examples/sdna/inputs_event.npz"],
    "sdna-event-pairwise": ["examples/sdna/model.py:event_pairwise", "--weights", "examples/sdna/event.pt",
                            "--inputs", "examples/sdna/inputs_event.npz"],
}

# A pytest plugin (loaded with -p) recording failed test ids, collection errors and per-file durations.
PLUGIN = '''
import json, os
_OUT = os.environ["SPIKEC_MUTATION_REPORT"]
_durations = {}
def _write(kind, nodeid):
    with open(_OUT, "a") as f:
        f.write(json.dumps([kind, nodeid]) + "\\n")
def pytest_collectreport(report):
    if report.failed:
        _write("collect", report.nodeid)
def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    _durations[path] = _durations.get(path, 0.0) + report.duration
    if report.failed:
        _write("failed", report.nodeid)
def pytest_sessionfinish(session):
    _write("durations", _durations)
'''


def load_mutants():
    spec = importlib.util.spec_from_file_location("spikec_mutants", Path(__file__).with_name("mutants.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses resolve the module by name
    spec.loader.exec_module(module)
    return module


# -- the private copy ---------------------------------------------------------------------------------
def source_files(root: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files that exist; a plain walk when git is unavailable."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout.decode()
        files = sorted({f for f in out.split("\0") if f})
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
            files += [str(Path(dirpath, f).relative_to(root)) for f in filenames]
    return [f for f in files if (root / f).is_file() and not set(Path(f).parts) & SKIP_DIRS]


def make_copy(root: Path, files: list[str], dest: Path) -> Path:
    for f in files:
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, target)
    return dest


# -- running things --------------------------------------------------------------------------------------
@dataclass
class Proc:
    code: int | None          # None: timed out
    seconds: float
    output: str


def run(cmd: list, cwd: Path, env: dict, timeout: float) -> Proc:
    """Run ``cmd`` in its own process group; on timeout end that group (SIGTERM, then SIGKILL)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
            for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        log.seek(0)
        output = log.read().decode(errors="replace")
    return Proc(code, time.perf_counter() - start, output)


class Workspace:
    """One private copy of the repository and the environment that runs it."""

    def __init__(self, path: Path, python: str, plugin_dir: Path):
        self.path, self.python = path, python
        self.report = path / ".mutation-report.jsonl"
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path), str(plugin_dir)]),
                        PYTHONDONTWRITEBYTECODE="1", SPIKEC_MUTATION_REPORT=str(self.report))
        self.env.pop("PYTHONHOME", None)

    def check_import(self) -> str:
        p = run([self.python, "-c", "import spikec; print(spikec.__file__)"], self.path, self.env, 300)
        where = p.output.strip().splitlines()[-1] if p.output.strip() else ""
        if p.code != 0 or not where.startswith(str(self.path)):
            raise SystemExit(f"mutation: the copy at {self.path} imports spikec from {where!r} (exit {p.code}): "
                             f"{p.output[-2000:]}")
        return where

    def pytest(self, tests: list, timeout: float, stop_first: bool = True, deselect=()) -> tuple[Proc, dict]:
        self.report.unlink(missing_ok=True)
        cmd = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "spikec_mutation_plugin"]
        cmd += ["-x"] if stop_first else ["--continue-on-collection-errors"]
        cmd += [a for d in deselect for a in ("--deselect", d)] + list(tests)
        p = run(cmd, self.path, self.env, timeout)
        events = {"failed": [], "collect": [], "durations": {}}
        if self.report.exists():
            for line in self.report.read_text().splitlines():
                kind, value = json.loads(line)
                if kind == "durations":
                    events["durations"] = value
                else:
                    events[kind].append(value)
        self.report.unlink(missing_ok=True)
        for h in list(self.path.rglob(".hypothesis")):   # no example database shared between mutants
            shutil.rmtree(h, ignore_errors=True)
        return p, events

    def compile(self, example: str, timeout: float) -> Proc:
        out = Path(tempfile.mkdtemp(prefix="mutation-out-", dir=self.path / "build"))
        try:
            return run([self.python, "-m", "spikec.app.cli", "compile", *EXAMPLES[example], "-o", str(out / "out")],
                       self.path, self.env, timeout)
        finally:
            shutil.rmtree(out, ignore_errors=True)


# -- baseline ------------------------------------------------------------------------------------------
@dataclass
class Baseline:
    failing: dict = field(default_factory=dict)      # test file -> failing node ids (deselected for mutants)
    broken: set = field(default_factory=set)         # test files that do not even collect
    seconds: dict = field(default_factory=dict)      # test file -> seconds
    examples: dict = field(default_factory=dict)     # example -> seconds (only those that pass)
    dropped: dict = field(default_factory=dict)      # example -> exit code of its failing baseline


def baseline(ws: Workspace, test_files: list, examples: list, say) -> Baseline:
    b = Baseline()
    if test_files:
        say(f"baseline: {len(test_files)} test files on the unmutated copy ...")
        p, ev = ws.pytest(test_files, timeout=3600, stop_first=False)
        if p.code is None:
            raise SystemExit("mutation: the baseline test run timed out (3600 s)")
        for nodeid in ev["collect"]:
            b.broken.add(nodeid.split("::")[0])
        for nodeid in ev["failed"]:
            b.failing.setdefault(nodeid.split("::")[0], []).append(nodeid)
        b.seconds = ev["durations"]
        if p.code not in (0, 1) and not b.broken:
            raise SystemExit(f"mutation: the baseline test run ended with exit {p.code}:\n{p.output[-3000:]}")
        say(f"baseline: tests {p.seconds:.0f} s, {sum(map(len, b.failing.values()))} failing test(s) deselected"
            + (f", broken files: {', '.join(sorted(b.broken))}" if b.broken else ""))
        for f, ids in sorted(b.failing.items()):
            for i in ids:
                say(f"  already failing (deselected): {i}")
    for name in examples:
        p = ws.compile(name, timeout=1800)
        if p.code == 0:
            b.examples[name] = p.seconds
        else:
            b.dropped[name] = p.code
            say(f"  example {name} fails unmutated (exit {p.code}): dropped from the runtime checks\n"
                + "\n".join("    " + line for line in p.output.strip().splitlines()[-5:]))
    if examples:
        say("baseline: examples " + ", ".join(f"{k} {v:.0f} s" for k, v in b.examples.items()))
    return b


# -- one mutant ------------------------------------------------------------------------------------------
@dataclass
class Result:
    id: str
    kind: str
    semantic: bool | None
    tests: str = "n.a."              # killed | survived | timeout | error | no-tests | invalid
    killed_by: str = ""
    runtime: str = "n.a."            # caught | missed | n.a.
    caught_by: str = ""
    seconds: float = 0.0
    detail: str = ""


def run_mutant(mu, ws: Workspace, base: Baseline, args) -> Result:
    r = Result(mu.id, mu.kind, mu.semantic)
    start = time.perf_counter()
    path = ws.path / mu.file
    text = path.read_text()
    if text.count(mu.original) != 1:
        r.tests, r.detail = "invalid", f"original text occurs {text.count(mu.original)} times in {mu.file}"
        return r
    mutated = text.replace(mu.original, mu.replacement)
    try:
        compile(mutated, str(path), "exec")
    except SyntaxError as e:
        r.tests, r.detail = "invalid", f"mutated source does not compile: {e}"
        return r
    path.write_text(mutated)
    try:
        tests = [t for t in mu.tests if t not in base.broken and (ws.path / t).exists()]
        if not tests:
            r.tests = "no-tests"
        else:
            deselect = [i for t in tests for i in base.failing.get(t, ())]
            timeout = args.timeout or 60 + 4 * sum(base.seconds.get(t, 30.0) for t in tests)
            p, ev = ws.pytest(tests, timeout, deselect=deselect)
            if p.code is None:
                r.tests, r.detail = "timeout", f"tests exceeded {timeout:.0f} s"
            elif p.code == 0:
                r.tests = "survived"
            elif p.code in (1, 2):
                r.tests = "killed"
                r.killed_by = (ev["failed"] or ev["collect"] or ["(pytest exit %d)" % p.code])[0]
            else:
                r.tests, r.detail = "error", f"pytest exit {p.code}: {p.output.strip()[-500:]}"
        if mu.kind == "pass" and mu.semantic and not args.no_runtime:
            order = [e for e in mu.examples if e in base.examples] + [e for e in base.examples if e not in mu.examples]
            r.runtime = "missed"
            for name in order:
                p = ws.compile(name, timeout=args.runtime_timeout or 120 + 4 * base.examples[name])
                if p.code != 0:
                    r.runtime = "caught"
                    r.caught_by = f"{name} ({'timeout' if p.code is None else f'exit {p.code}'})"
                    break
    finally:
        path.write_text(text)
    r.seconds = time.perf_counter() - start
    return r


# -- report ----------------------------------------------------------------------------------------------
def table(results: list) -> str:
    rows = [("mutant", "kind", "tests", "runtime", "seconds")]
    for r in results:
        kind = r.kind + ("" if r.semantic is None else " (semantic)" if r.semantic else " (report only)")
        by = r.killed_by.split("/")[-1] if r.killed_by else ""
        tests = r.tests + (f"  [{by}]" if by else "") + (f"  {r.detail}" if r.detail else "")
        runtime = r.runtime + (f"  [{r.caught_by}]" if r.caught_by else "")
        rows.append((r.id, kind, tests, runtime, f"{r.seconds:.0f}"))
    caps = (40, 24, 90, 36, 8)
    rows = [tuple(c if len(c) <= cap else c[:cap - 3] + "..." for c, cap in zip(row, caps)) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(caps))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def scores(results: list, runtime: bool) -> tuple[dict, bool]:
    counted = [r for r in results if r.tests in ("killed", "survived", "timeout")]
    killed = [r for r in counted if r.tests in ("killed", "timeout")]
    semantic = [r for r in results if r.kind == "pass" and r.semantic and r.runtime in ("caught", "missed")]
    caught = [r for r in semantic if r.runtime == "caught"]
    s = {"mutants": len(results), "tests_counted": len(counted), "tests_killed": len(killed),
         "tests_kill_percent": round(100.0 * len(killed) / len(counted), 1) if counted else None,
         "tests_survivors": [r.id for r in counted if r.tests == "survived"],
         "not_counted": {r.id: r.tests for r in results if r not in counted},
         "semantic_pass_mutants": len(semantic), "runtime_caught": len(caught),
         "runtime_catch_percent": round(100.0 * len(caught) / len(semantic), 1) if semantic else None,
         "runtime_missed": [r.id for r in semantic if r.runtime == "missed"]}
    ok = (s["tests_kill_percent"] is None or s["tests_kill_percent"] >= TEST_TARGET) and not s["not_counted"]
    if runtime and semantic:
        ok = ok and s["runtime_catch_percent"] >= RUNTIME_TARGET
    return s, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--set", choices=("all", "curated", "blind-spots"), default="all",
                    help="curated: MUTANTS; blind-spots: BLIND_SPOTS (bugs planted in code added late, tests/**/"
                         "test_blind_spots*.py written for them); all: both (default)")
    ap.add_argument("--exclude-tests", help="comma-separated fnmatch patterns: test files dropped from every mutant's "
                                            "list (what the other tests alone kill)")
    ap.add_argument("--keep-tests", help="comma-separated fnmatch patterns: only matching test files stay in each "
                                         "mutant's list (what those tests alone kill)")
    ap.add_argument("--kind", help="comma-separated kinds: pass, checker, interpreter, quantizer, emitter, export")
    ap.add_argument("--no-runtime", action="store_true", help="skip the runtime checks of semantic pass mutants")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run in parallel, one private copy each (default 1)")
    ap.add_argument("--timeout", type=float, help="seconds per mutant's test run (default: 60 + 4x its baseline)")
    ap.add_argument("--runtime-timeout", type=float, help="seconds per example compile (default: 120 + 4x baseline)")
    ap.add_argument("--examples", help="comma-separated runtime examples (default: all of " + ", ".join(EXAMPLES) + ")")
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python")
                    .exists() else sys.executable, help="interpreter running the tests and the CLI")
    ap.add_argument("--json", help="also write the results and scores to this JSON file")
    ap.add_argument("--keep", action="store_true", help="keep the private copies (their paths are printed)")
    args = ap.parse_args(argv)

    mod = load_mutants()
    mutants = {"curated": list(mod.MUTANTS), "blind-spots": list(mod.BLIND_SPOTS),
               "all": list(mod.MUTANTS) + list(mod.BLIND_SPOTS)}[args.set]
    if args.exclude_tests:
        pats = [p.strip() for p in args.exclude_tests.split(",") if p.strip()]
        mutants = [dataclasses.replace(m, tests=tuple(t for t in m.tests if not any(fnmatch.fnmatch(t, p)
                                                                                     for p in pats)))
                   for m in mutants]
    if args.keep_tests:
        pats = [p.strip() for p in args.keep_tests.split(",") if p.strip()]
        mutants = [dataclasses.replace(m, tests=tuple(t for t in m.tests if any(fnmatch.fnmatch(t, p) for p in pats)))
                   for m in mutants]
    if args.only:
        want = [i.strip() for i in args.only.split(",") if i.strip()]
        unknown = sorted(set(want) - {m.id for m in mutants})
        if unknown:
            print(f"mutation: unknown mutant id(s) {unknown}; see --list", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in want]
    if args.kind:
        kinds = {k.strip() for k in args.kind.split(",")}
        if kinds - set(mod.KINDS):
            print(f"mutation: unknown kind(s) {sorted(kinds - set(mod.KINDS))}; kinds: {', '.join(mod.KINDS)}",
                  file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.kind in kinds]
    if args.list:
        for m in mutants:
            sem = "" if m.semantic is None else " semantic" if m.semantic else " report-only"
            print(f"{m.id:40} {m.kind}{sem}\n    {m.file}: {m.original.strip()!r}\n    -> {m.replacement.strip()!r}"
                  f"\n    tests: {' '.join(m.tests)}" + (f"\n    examples first: {', '.join(m.examples)}" if m.examples
                                                          else "") + (f"\n    {m.why}" if m.why else ""))
        print(f"{len(mutants)} mutants: " + ", ".join(f"{k} {sum(m.kind == k for m in mutants)}" for k in mod.KINDS
                                                      if any(m.kind == k for m in mutants)))
        return 0
    if not mutants:
        print("mutation: no mutant selected", file=sys.stderr)
        return 2
    examples = list(EXAMPLES) if not args.examples else [e.strip() for e in args.examples.split(",") if e.strip()]
    if set(examples) - set(EXAMPLES):
        print(f"mutation: unknown example(s) {sorted(set(examples) - set(EXAMPLES))}", file=sys.stderr)
        return 2
    needs_runtime = not args.no_runtime and any(m.kind == "pass" and m.semantic for m in mutants)

    lock = threading.Lock()

    def say(msg):
        with lock:
            print(msg, flush=True)

    t0 = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="spikec-mutation-"))
    (scratch / "plugin").mkdir()
    (scratch / "plugin" / "spikec_mutation_plugin.py").write_text(PLUGIN)
    try:
        files = source_files(ROOT)
        missing = [m.id for m in mutants if m.file not in files]
        if missing:
            print(f"mutation: mutated file(s) not in the repository: {missing}", file=sys.stderr)
            return 2
        jobs = max(1, min(args.jobs, len(mutants)))
        workspaces = []
        for j in range(jobs):
            ws = Workspace(make_copy(ROOT, files, scratch / f"copy{j}"), args.python, scratch / "plugin")
            (ws.path / "build").mkdir(exist_ok=True)
            workspaces.append(ws)
        bad = [m.id for m in mutants if (workspaces[0].path / m.file).read_text().count(m.original) != 1]
        if bad:
            print(f"mutation: original text not found exactly once for {bad} (run tests/tools/test_mutants_apply.py)",
                  file=sys.stderr)
            return 2
        say(f"mutation: {len(mutants)} mutants, {len(files)} files copied to {scratch}"
            f" ({jobs} cop{'y' if jobs == 1 else 'ies'}); spikec from {workspaces[0].check_import()}")
        test_files = sorted({t for m in mutants for t in m.tests if (workspaces[0].path / t).exists()})
        base = baseline(workspaces[0], test_files, examples if needs_runtime else [], say)

        pool: queue.Queue = queue.Queue()
        for ws in workspaces:
            pool.put(ws)
        done = []

        def task(mu):
            ws = pool.get()
            try:
                r = run_mutant(mu, ws, base, args)
            finally:
                pool.put(ws)
            with lock:
                done.append(r)
                n = len(done)
            extra = f" [{r.killed_by}]" if r.killed_by else f" {r.detail}" if r.detail else ""
            rt = "" if r.runtime == "n.a." else f"; runtime {r.runtime}" + (f" by {r.caught_by}" if r.caught_by else "")
            say(f"[{n}/{len(mutants)}] {r.id}: tests {r.tests}{extra}{rt} ({r.seconds:.0f} s)")
            return r

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            results = list(ex.map(task, mutants))   # in list order
    finally:
        if args.keep:
            print(f"mutation: copies kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    elapsed = time.perf_counter() - t0
    s, ok = scores(results, needs_runtime)
    print()
    print(table(results))
    if base.dropped:
        print(f"\nexamples dropped (failing unmutated): {base.dropped}")
    by_id = {m.id: m for m in mutants}
    if s["tests_survivors"]:
        print("\nsurvived the tests:")
        for i in s["tests_survivors"]:
            print(f"  {i}: {by_id[i].why}")
    if s["runtime_missed"]:
        print("\nsemantic pass mutants no shipped example catches at runtime:")
        for i in s["runtime_missed"]:
            print(f"  {i}: {by_id[i].why}")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": [r.__dict__ for r in results], "scores": s,
                                               "seconds": round(elapsed, 1),
                                               "baseline": {"failing": base.failing, "broken": sorted(base.broken),
                                                            "examples": base.examples, "dropped": base.dropped}},
                                              indent=1))
    kinds = ", ".join(f"{k} {sum(r.kind == k for r in results)}" for k in mod.KINDS if any(r.kind == k for r in results))
    print(f"\n{len(results)} mutants ({kinds}) in {elapsed / 60:.1f} min")
    tk = "n.a." if s["tests_kill_percent"] is None else f"{s['tests_kill_percent']}%"
    print(f"tests kill: {s['tests_killed']}/{s['tests_counted']} = {tk} (target >= {TEST_TARGET:g}%)"
          + (f"; not counted: {s['not_counted']}" if s["not_counted"] else ""))
    if needs_runtime:
        print(f"runtime catch of semantic pass mutants: {s['runtime_caught']}/{s['semantic_pass_mutants']} = "
              f"{s['runtime_catch_percent']}% (target {RUNTIME_TARGET:g}%)")
    else:
        print("runtime catch of semantic pass mutants: n.a. (" + ("--no-runtime" if args.no_runtime else
                                                                 "no semantic pass mutant selected") + ")")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
