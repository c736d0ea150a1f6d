"""README's commands run as written from a fresh clone.

Every ``spikec ...`` line of README's code blocks (and every Python block) runs, in README's order, in one copy of
the files git tracks or would track (nothing ignored, no earlier ``build/``), with the virtualenv's ``bin`` first
on PATH, and exits 0. Their outputs are under ``build/``, which git ignores. README itself stays short and opens
with the two commands a newcomer types. None of README's commands runs Lava (``make demo`` does, and is not run
here): each compile is a few seconds of CPU.

The runnable ``spikec`` commands of docs/ and examples/*/README.md (a usage synopsis, with ``MODEL`` or ``OUTDIR``
placeholders, is not one) are heavier (TTFS calibration, Lava runs): they run the same way when
``SPIKEC_DOC_COMMANDS=1`` is set, and are skipped otherwise.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SKIPPED = {".git", ".venv", "build", "__pycache__", ".pytest_cache", ".hypothesis"}
TIMEOUT = 900  # seconds per command: a compile on a busy 2-core machine


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def commands(text: str) -> list[tuple[str, str]]:
    """What README asks a reader to run, in order: ``("sh", line)`` for each ``spikec`` line of a plain block
    (a trailing backslash joins the next line), ``("python", body)`` for each Python block."""
    out = []
    for lang, body in blocks(text):
        if lang == "python":
            out.append(("python", body))
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip().startswith("spikec "):
                out.append(("sh", line.strip()))
    return out


def fresh_clone(dest: Path) -> Path:
    """The files a clone would have (tracked, or untracked and not ignored), copied under ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if not src.is_file() or SKIPPED & set(Path(rel).parts):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    return dest


COMMANDS = commands(README.read_text())
PLACEHOLDER = re.compile(r"\b(MODEL|OUTDIR|CKPT|FILE|DATA|DT|N)\b|\[")
DOC_PAGES = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "examples").glob("*/README.md"))
DOC_COMMANDS = [(p.relative_to(ROOT).as_posix(), c) for p in DOC_PAGES for k, c in commands(p.read_text())
                if k == "sh" and not PLACEHOLDER.search(c)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return fresh_clone(tmp_path_factory.mktemp("clone"))


def run_in(clone: Path, kind: str, command: str) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [sys.executable, "-c", command] if kind == "python" else shlex.split(command)
    done = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def outputs(kind: str, command: str) -> list[str]:
    """The paths a command writes: its ``-o`` OUTDIR, a Python block's ``save("...")``."""
    if kind == "python":
        return re.findall(r"save\(\"([^\"]+)\"\)", command)
    words = shlex.split(command)
    return [words[words.index("-o") + 1]] if "-o" in words else []


def chains(cmds: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """README's commands as independent chains, each in README's order: a command joins the chain of the
    earlier command whose output it names (``verify build/quick`` after the compile that wrote it)."""
    out, owner = [], {}
    for kind, command in cmds:
        reads = [owner[o] for o in owner if re.search(rf"(?<![\w/]){re.escape(o)}(?![\w])", command)]
        chain = reads[0] if reads else len(out)
        if chain == len(out):
            out.append([])
        out[chain].append((kind, command))
        owner.update({o: chain for o in outputs(kind, command)})
    return out


def test_readme_commands_run_as_written(clone):
    """In README's order, in one fresh copy: a later command reads what an earlier one wrote (build/quick).
    Independent chains run side by side (each command is a process importing torch: seconds of start-up)."""
    from concurrent.futures import ThreadPoolExecutor
    assert len(COMMANDS) >= 8
    groups = chains(COMMANDS)
    assert len(groups) > 1 and sum(map(len, groups)) == len(COMMANDS)

    def run_chain(chain):
        for kind, command in chain:
            run_in(clone, kind, command)
    with ThreadPoolExecutor(max_workers=3) as pool:   # 3: a torch process each, on a 2-core machine
        for done in [pool.submit(run_chain, c) for c in groups]:
            done.result()


def test_chains_keep_a_reader_after_its_writer():
    cmds = [("sh", "spikec compile a.py:f -o build/q"), ("sh", "spikec compile b.py:g -o build/q2"),
            ("python", 'c.save("build/api")'), ("sh", "spikec verify build/q"),
            ("sh", "spikec compile b.py:g --inputs build/q2/io.npz -o build/r")]
    assert chains(cmds) == [[cmds[0], cmds[3]], [cmds[1], cmds[4]], [cmds[2]]]
    readme = chains(COMMANDS)
    assert any(c[0][1].startswith("spikec compile") and any(" verify " in f" {k[1]}" for k in c[1:]) for c in readme)


@pytest.mark.skipif(os.environ.get("SPIKEC_DOC_COMMANDS") != "1", reason="heavy: set SPIKEC_DOC_COMMANDS=1")
def test_doc_commands_run_as_written(tmp_path):
    clone = fresh_clone(tmp_path)
    for _, command in DOC_COMMANDS:
        run_in(clone, "sh", command)


def test_the_doc_commands_are_found():
    pages = {p for p, _ in DOC_COMMANDS}
    assert {"docs/frameworks.md", "examples/ttfs/README.md"} <= pages
    assert not any(c.startswith("spikec compile MODEL") for _, c in DOC_COMMANDS)


def test_readme_opens_with_the_two_commands_and_stays_short():
    text = README.read_text()
    assert text.splitlines()[:4] == ["```", "make demo", "make test", "```"]
    assert len(text.splitlines()) <= 170


def test_every_output_is_under_build_which_git_ignores():
    outs = [shlex.split(c)[shlex.split(c).index("-o") + 1] for k, c in COMMANDS if k == "sh" and " -o " in c]
    saved = re.findall(r"save\(\"([^\"]+)\"\)", README.read_text())
    assert outs and saved and all(p.startswith("build/") for p in outs + saved)
    ignored = subprocess.run(["git", "check-ignore", "-q", "build/anything"], cwd=ROOT)
    assert ignored.returncode == 0


def test_commands_are_found_in_every_form():
    text = ("```\nspikec compile a.py:f \\\n  -o build/x\nmake demo\n```\n```python\nprint(1)\n```\n"
            "```\n  spikec verify build/x\n```\n")
    assert commands(text) == [("sh", "spikec compile a.py:f    -o build/x"), ("python", "print(1)\n"),
                              ("sh", "spikec verify build/x")]


def test_the_default_target_is_stated_in_help_and_readme_as_it_is():
    import inspect

    from click.testing import CliRunner

    from spikec.app import api
    from spikec.app.cli import main
    flat = " ".join(CliRunner().invoke(main, ["compile", "--help"]).output.split())
    api_default = inspect.signature(api.compile).parameters["targets"].default
    assert api_default == api.DEFAULT_TARGETS
    assert "[default: none]" in flat and f"spikec.compile defaults to {','.join(api_default)}" in flat
    readme = " ".join(README.read_text().split())
    assert "The CLI's default is `none`; the Python API's is all three" in readme and len(api_default) == 3
