"""``spikec nir-check FILE.nir``: the conformance findings of a file (``conformance``), and whether spikec's
frontend builds it. Apart from ``conformance`` because it imports the frontend, which imports ``conformance``."""
from spikec.compiler.errors import SpikecError
from spikec.targets.nir.conformance import ERROR, finding, nir_diagnostics, read_nir
from spikec.targets.nir.frontend import load_nir


def check_file(path, dt: float = 1e-4, scheme: str = "snntorch") -> dict:
    """``spikec nir-check``: ``{file, dt, scheme, findings, compiles}``; BadInput for a missing/unreadable file
    or a bad dt/scheme. ``compiles`` is whether spikec's frontend builds the IR (its refusal is an error)."""
    graph, found = read_nir(path)
    found += nir_diagnostics(graph, dt, scheme)
    compiles = not any(f["severity"] == ERROR for f in found)
    if compiles:
        try:
            load_nir(graph, dt=dt, scheme=scheme)
        except SpikecError as e:
            compiles = False
            found.append(finding("graph", "spikec_refuses", ERROR, f"spikec's frontend refuses the file: {e}"))
    return {"file": str(path), "dt": float(dt), "scheme": scheme, "compiles": compiles, "findings": found}


def exit_code(result: dict) -> int:
    return 1 if any(f["severity"] == ERROR for f in result["findings"]) else 0


def format_lines(result: dict) -> list[str]:
    one_line = lambda text: " ".join(str(text).split())  # a SpikecError's message has a remedy line
    lines = [f"{f['severity']}: {f['node']}: {f['kind']}: {one_line(f['message'])}" for f in result["findings"]]
    errors = sum(f["severity"] == ERROR for f in result["findings"])
    verdict = "usable" if not errors else f"unusable as is ({errors} error{'s' if errors != 1 else ''})"
    return lines + [f"{result['file']}: {verdict} at dt = {result['dt']:g}, scheme {result['scheme']!r}"]


def nir_check_command(path, dt: float, scheme: str, as_json: bool, say) -> int:
    """The CLI's ``nir-check``: print the findings (one a line, or JSON) with ``say``; return the exit code."""
    import json
    result = check_file(path, dt, scheme)
    if as_json:
        say(json.dumps(result, indent=2, default=str))
    else:
        for line in format_lines(result):
            say(line)
    return exit_code(result)
