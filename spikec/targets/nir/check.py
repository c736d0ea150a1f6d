"""``spikec nir-check FILE.nir``: the conformance findings of a file (``conformance``), and whether spikec's
frontend builds it. Apart from ``conformance`` because it imports the frontend, which imports ``conformance``."""
from spikec.ir.errors import SpikecError
from spikec.formats.nir.conformance import ERROR, INFO, WARNING, finding, nir_diagnostics, read_nir
from spikec.frontend.nir_file import load_nir

READ_VERSIONS = ("1.0.7", "1.0.8")   # tested (tests/targets/nir/test_nir_versions.py); 1.0.8 changed no file field


def file_version(path) -> str | None:
    """The nir version that wrote ``path`` (its root ``version`` dataset), or None."""
    import h5py
    try:
        with h5py.File(path, "r") as f:
            v = f["version"][()] if "version" in f else None
    except (OSError, KeyError, TypeError, ValueError):
        return None
    return None if v is None else (v.decode() if isinstance(v, bytes) else str(v))


def version_findings(path) -> list[dict]:
    import nir
    if isinstance(path, nir.NIRGraph):   # a graph in memory, not a file: no version to name
        return []
    v = file_version(path)
    if v is None:
        return [finding("graph", "nir_version", WARNING, f"the file records no nir version; read with nir {nir.version}")]
    note = "" if v in READ_VERSIONS else f" (spikec is tested on files of nir {' and '.join(READ_VERSIONS)})"
    return [finding("graph", "nir_version", INFO, f"written by nir {v}, read with nir {nir.version}{note}; nir 1.0.8 "
                    "made input_type/output_type init-only and metadata keyword-only, which changes no stored field")]


def metadata_findings(graph, scheme: str) -> list[dict]:
    """What spikec's metadata says about reading the file: a consumer scheme (the file means Sinabs's neurons, not
    NIR's: ``schemes_sinabs``) and a read-out over time its reader applies (``readout``)."""
    import json
    meta = graph.metadata if isinstance(graph.metadata, dict) else {}
    text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    out = []
    if text(meta.get("scheme", "")) == "sinabs":
        out.append(finding("graph", "consumer_scheme", WARNING, f"written in the consumer scheme 'sinabs' (metadata): "
                           f"{text(meta.get('consumer_scheme', ''))}; sinabs.from_nir runs it as meant, and read here "
                           f"at scheme {scheme!r} it is NIR's one-spike neurons, another model"))
    if "read_over_time" in meta:
        for out_name, spec in json.loads(text(meta["read_over_time"])).items():
            out.append(finding(out_name, "read_over_time", INFO, f"the model's output is this output's {spec['reduce']} "
                               "over time (metadata read_over_time): NIR graphs are per step"))
    return out


def consumer_findings(graph, dt: float) -> list[dict]:
    """Per installed consumer, what in the file it would run differently (``consumers.limits``), or that it runs it."""
    from spikec.targets.nir import consumers
    out, found = [], consumers.limits(graph, dt)
    for name in consumers.CONSUMERS:
        if consumers.available(name) is not None:
            continue
        if not found[name]:
            out.append(finding("graph", f"consumer_{name}", INFO, f"{name}: no known limit (it should run the file "
                               "spike for spike)"))
        for why in found[name]:
            out.append(finding("graph", f"consumer_{name}", WARNING, f"{name}: {why}"))
    return out


def check_file(path, dt: float = 1e-4, scheme: str = "snntorch") -> dict:
    """``spikec nir-check``: ``{file, dt, scheme, findings, compiles}``; BadInput for a missing/unreadable file
    or a bad dt/scheme. ``compiles`` is whether spikec's frontend builds the IR (its refusal is an error)."""
    graph, found = read_nir(path)
    found = found + nir_diagnostics(graph, dt, scheme) + version_findings(path) + metadata_findings(graph, scheme)
    try:
        found += consumer_findings(graph, dt)
    except Exception as e:  # a malformed graph the limits cannot walk: the other findings say what is wrong
        found.append(finding("graph", "consumer_limits", WARNING, f"consumer limits not computed: {e}"))
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
