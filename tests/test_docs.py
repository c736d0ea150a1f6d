"""The user documentation holds together: README.md and docs/*.md link only to files (and headings) that exist,
every docs/ page is listed in the README, nothing in the repository points at the specification outside it,
and docs/neurons.md documents every neuron op of the IR."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SPEC = "shared" + "/spec"          # spelled in two parts so that this file does not reference it itself
SKIPPED_DIRS = {".git", ".venv", "build", "__pycache__", ".pytest_cache", ".hypothesis"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (a link shown as code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m) for m in re.findall(r"^#+\s+(.*)$", FENCE.sub("", path.read_text()), re.M)}


def broken_links(path: Path) -> list[str]:
    """Relative links in ``path`` whose file (or heading anchor) does not exist."""
    bad = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(f"{path.name}: {target} (no file {dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{path.name}: {target} (no heading #{anchor} in {dest.name})")
    return bad


def repository_files() -> list[Path]:
    """Tracked and untracked files git does not ignore; without git, a walk skipping tool directories."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout
        files = [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*") if p.is_file()]
    return [p for p in files if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts)
            and not any(part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)]


def spec_references(files, root: Path = ROOT) -> list[str]:
    needle = SPEC.encode()
    return [str(p.relative_to(root)) for p in files if needle in p.read_bytes()]


def neuron_ops() -> set[str]:
    """The IR's neuron ops, as the README's coverage table counts ops (Lava's and the TTFS coding's internal ops
    excluded): those flagged ``neuron``, those of ``spikec.ops.neurons`` (with the sub-step sum), and the stateful
    ops a framework converter defines (its framework-exact neurons)."""
    import spikec.frontend.tracing  # noqa: F401  (the converters and their ops)
    import spikec.targets  # noqa: F401
    from spikec.ops import OPS
    from spikec.targets.coverage import covered_ops
    return {op for op in covered_ops()
            if OPS[op].neuron or OPS[op].module == "spikec.ops.neurons"
            or (OPS[op].stateful and OPS[op].module.startswith("spikec.frontend."))}


def undocumented(ops, text: str) -> list[str]:
    """Ops whose name is neither a heading nor a code span of ``text``."""
    headings = set(re.findall(r"^#+\s+`?([\w.]+)`?", text, re.M))
    spans = set(re.findall(r"`([\w.]+)`", text))
    return sorted(op for op in ops if op not in headings | spans)


# -- the repository ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.name)
def test_relative_links_point_at_existing_files(path):
    assert not broken_links(path)


def test_every_docs_page_is_listed_in_the_readme():
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(_prose((ROOT / "README.md").read_text()))
              if t.startswith("docs/")}
    assert {p.name for p in DOCS.glob("*.md")} <= linked


def test_nothing_references_the_specification_outside_the_repository():
    files = repository_files()
    assert ROOT / "README.md" in files and Path(__file__) in files
    assert not spec_references(files)


def test_neurons_md_documents_every_neuron_op():
    ops = neuron_ops()
    assert {"lif", "intfire", "intfire_unrolled", "substep_sum", "silif", "csilif", "lif_snntorch",
            "synaptic_snntorch", "rleaky_snntorch", "alpha_snntorch", "lif_sj", "lif_norse", "li_norse"} <= ops
    assert not any(op.startswith(("lava_", "ttfs_")) for op in ops)
    assert not undocumented(ops, (DOCS / "neurons.md").read_text())


# -- the checks themselves can fail ---------------------------------------------------------------------
def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#a-heading) [web](https://example.org/x.md) `[code](gone.md)`\n"
                    "[gone](missing.md) [bad anchor](there.md#nowhere)\n```\n[fenced](gone.md)\n```\n")
    bad = broken_links(page)
    assert len(bad) == 2 and "missing.md" in bad[0] and "#nowhere" in bad[1]


def test_a_spec_reference_is_found(tmp_path):
    (tmp_path / "a.py").write_text(f'"""See ../{SPEC}/semantics.md."""\n')
    (tmp_path / "b.py").write_text('"""See docs/neurons.md."""\n')
    assert spec_references([tmp_path / "a.py", tmp_path / "b.py"], tmp_path) == ["a.py"]


def test_an_undocumented_neuron_is_found():
    text = "## `lif`\nThe `intfire` neuron.\nlif_sj in prose only.\n"
    assert undocumented({"lif", "intfire", "lif_sj"}, text) == ["lif_sj"]
