"""Fingerprints of the examples' compiles: the same reports and figures before and after a refactor.

``python tools/fingerprints.py --write before.json`` compiles every example in ``EXAMPLES`` (in process, through
``compile_model``, as tests/examples do) and writes, per example, its report with what varies from run to run
taken out (times, paths, memory, versions), floats rounded to 12 significant digits, and a sha256 of it.
``python tools/fingerprints.py --compare before.json after.json`` prints each example's verdict (same / differs)
and, for one that differs, the report paths whose values differ; it exits 1 if any differs.
"""
import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"

# name -> CompileOptions keywords (paths relative to examples/)
EXAMPLES = {
    "digits-lava": dict(model="digits/model.py:small", weights="digits/checkpoint.pt", inputs="digits/inputs.npz",
                        target="lava"),
    "digits-nir-onnx": dict(model="digits/model.py:small", weights="digits/checkpoint.pt",
                            inputs="digits/inputs.npz", target="nir,onnx"),
    "digits_loihi-lava": dict(model="digits_loihi/model.py:small_chip", weights="digits_loihi/checkpoint_chip.pt",
                              inputs="digits_loihi/inputs.npz", target="lava"),
    "ripe-small": dict(model="ripe/model.py:small", weights="ripe/checkpoint.pt", inputs="ripe/inputs.npz"),
    "sdt": dict(model="sdt/model.py:small", weights="sdt/checkpoint.pt", inputs="sdt/inputs.npz", target="onnx"),
    "sdna-event_pairwise": dict(model="sdna/model.py:event_pairwise", weights="sdna/event.pt",
                                inputs="sdna/inputs_event.npz", target="lava"),
    "rules": dict(model="rules/model.py:rules", inputs="rules/inputs.npz"),
    "ttfs-mlp": dict(model="ttfs/mlp.py:mlp", weights="ttfs/mlp.pt", coding="ttfs", target="onnx"),
    "xylo-kws": dict(model="xylo/model.py:kws", weights="xylo/checkpoint.pt", inputs="xylo/inputs.npz",
                     target="lava,xylo,nir,onnx"),
    "frameworks-snntorch_step": dict(model="frameworks/snntorch_step.py:net", input_shape=(1, 12, 12), steps=8,
                                     stepping="step", target="lava,nir,onnx"),
}
PATH_KEYS = ("model", "weights", "inputs")
# report keys whose values vary between two runs of the same compile
VOLATILE = re.compile(r"(time|seconds|_s$|cpu|wall|elapsed|duration|date|path|dir|file|pid|host|version|"
                      r"provenance|memory|rss|peak|bytes|sha|hash|started|python|platform|mtime)", re.I)

SECONDS = re.compile(r"\b\d+(\.\d+)? ?(s|ms|min|CPU s)\b")


def normal(value, key=""):
    """``value`` with volatile keys dropped and floats rounded (12 significant digits)."""
    if isinstance(value, dict):
        return {k: normal(v, k) for k, v in sorted(value.items()) if not VOLATILE.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [normal(v, key) for v in value]
    if isinstance(value, float):
        return value if not math.isfinite(value) or value == 0 else float(f"{value:.12g}")
    if isinstance(value, str):   # durations printed inside summary lines vary too
        return SECONDS.sub("<time>", value.replace(str(ROOT), "<repo>"))
    return value


def fingerprint(name: str, out: Path) -> dict:
    from spikec.app.driver import CompileOptions, compile_model
    options = dict(EXAMPLES[name])
    for key in PATH_KEYS:
        if key in options:
            options[key] = str(EX / options[key])
    compiled = compile_model(CompileOptions(**options))
    if hasattr(compiled, "save"):
        compiled.save(out / name)
    report = normal(json.loads(json.dumps(compiled.report, default=str)))
    text = json.dumps(report, sort_keys=True)
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "report": report}


def differences(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for k in sorted(set(a) | set(b)):
            found += differences(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{where}.{k}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {str(a)[:80]} -> {str(b)[:80]}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", metavar="JSON")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--only", nargs="*", default=None, help="example names (default: all)")
    args = parser.parse_args(argv)
    if args.write:
        found, status = {}, 0
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.only or EXAMPLES:
                try:
                    found[name] = fingerprint(name, Path(tmp))
                except Exception as e:   # an example that does not compile is a fingerprint of its own
                    found[name], status = {"sha256": f"error: {type(e).__name__}: {e}", "report": {}}, 1
                print(f"{name:28s} {found[name]['sha256'][:16]}", flush=True)
                Path(args.write).write_text(json.dumps(found, indent=1, sort_keys=True))   # as each one ends
        return status
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        status = 0
        for name in sorted(set(before) | set(after)):
            if name not in before or name not in after:
                print(f"{name:28s} only in {'after' if name not in before else 'before'}")
                status = 1
                continue
            same = before[name]["sha256"] == after[name]["sha256"]
            print(f"{name:28s} {'same' if same else 'DIFFERS'}")
            if not same:
                status = 1
                for line in differences(before[name]["report"], after[name]["report"])[:40]:
                    print("   ", line)
        return status
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
