"""The CLI's account of a compile: the report, as lines a person reads (the app layer: it knows every part)."""
from spikec.codings.ttfs.report import summary_lines


def summary_text(report: dict) -> str:
    p = report["params"]
    lines = [f"spikec: {report['model']}", *_no_weights_lines(report),
             f"  input      [T={report['input']['steps']}, B={report['input']['batch']}, "
             f"{', '.join(map(str, report['input']['shape']))}] {report['input']['kind']} ({report['input']['source']})",
             f"  frontend   {_verdict(report['frontend'])}"
             f"{' (checked end to end: the deployed graph against the source)' if report['frontend'].get('checked') == 'end to end' else ''}",
             *_stepping_lines(report),
             f"  params     source {p['source']:,} -> deployed {p['deployed']:,}"]
    for name, c in p["by_module"].items():
        lines.append(f"             {name:<12} {c['source']:>9,} -> {c['deployed']:,}")
    for r in report["passes"]:
        skipped = f", {len(r['skipped'])} skipped" if r["skipped"] else ""
        lines.append(f"  pass       {r['name']:<16} {len(r['nodes_changed'])} nodes changed{skipped}, params "
                     f"{r['params_before']:,} -> {r['params_after']:,}; spike mismatches {r['spike_mismatches']}, "
                     f"max rel diff {r['max_rel_diff']:.2g} ({r['seconds']:.2f} s)"
                     f"{', checked ' + r['checked'] if r.get('checked', 'alone') != 'alone' and r['nodes_changed'] else ''}")
        lines += [f"             - skipped {s['node']}: {s['reason']}" for s in r["skipped"]]
        lines += [f"             - {note}" for note in r["notes"]]
    ac = sum(1 for l in report["layers"] if l["synaptic_kind"] == "AC")
    mac = sum(1 for l in report["layers"] if l["synaptic_kind"] == "MAC")
    lines.append(f"  synapses   {ac} accumulate-only (AC), {mac} multiply-accumulate (MAC)")
    lines += [f"             {l['name']:<16} {l['op']:<8} {l['product']}" for l in report["layers"] if "product" in l]
    lines += [f"  neuron     {l['name']:<16} {l['lowering']}" for l in report["layers"] if "lowering" in l]
    for b in report.get("sdna") or []:
        lines.append(f"  sdna       {b['block']:<16} {b['variant']:<8} {b['gate_evaluations_per_step']:,} gate evaluations "
                     f"per step (N={b['tokens']}, C={b['channels']}, k={b['window']}), "
                     f"{b['integer_products_per_step']:,} integer products per step (not spike-driven); "
                     f"{b['ac_ops']:,.0f} AC + {b['mac_ops']:,.0f} MAC per inference")
    if report.get("schedule"):
        lines.append(f"  schedule   {report['schedule']['latency_substeps_per_step']} virtual sub-steps of latency "
                     "per physical step (layers start after their producers' sub-steps)")
    for l in report["layers"]:
        if l["synaptic_kind"]:
            lines.append(f"             {l['name']:<16} {l['op']:<8} operand {l['operand_kind']:<8} {l['synaptic_kind']}")
    c = report["cost"]
    share = "n/a" if report["ac_share"] is None else f"{100 * report['ac_share']:.1f}%"
    lines.append(f"  cost       AC share of conv ops {share}; per inference {c['total_ac_ops']:,.0f} AC + "
                 f"{c['total_mac_ops']:,.0f} MAC = {c['synaptic_energy_pj'] / 1e6:.3g} uJ (45 nm estimate, "
                 "synaptic arithmetic only)")
    host = report["partitions"]["host"]
    if host:
        lines.append(f"  host       {len(host)} dense node(s) on a host partition ({', '.join(host)}); "
                     f"{report['partitions']['values_per_step']:,} values cross per step per sample")
    if report.get("ttfs"):
        lines += summary_lines(report["ttfs"])
    lines.append(f"  deployed   {_verdict(report['final'])}")
    ties = report["final"].get("near_threshold")
    if ties is not None:
        probes = report["input"].get("probes") or 0
        lines.append(f"  margins    {ties['count']:,} neuron values within {ties['tolerance']:g} of their threshold "
                     f"({ties['exact_ties']:,} exact ties)" + (f"; {probes} probe samples appended to the inputs"
                                                              if probes else "")
                     + (f"; {report['input']['probes_skipped']}" if report["input"].get("probes_skipped") else ""))
    lines += targets_lines(report)
    lines.append(f"  equivalent {str(report['equivalent']).lower()}{_why_not(report)}")
    return "\n".join(lines)


def _why_not(report: dict) -> str:
    """After ``equivalent false``: what made it so (a target refused, a target failed inside spikec, the deployed
    graph itself, or a target's check), so the last line says where to look; the lines above hold the reason and
    the remedy."""
    if report.get("equivalent") is not False:
        return ""
    targets = [(n, r) for n, r in (report.get("targets") or {}).items() if isinstance(r, dict)]
    named = (report.get("options") or {}).get("target") != "all"   # under 'all' a refusal is reported, not failed
    said = [f"target {n} deployed the approximate chip-ready variant ({r['approximate_variant']['option']}), never "
            "equivalent" for n, r in targets if isinstance(r.get("approximate_variant"), dict)]
    said += [f"target {', '.join(n for n, r in targets if r.get(kind))} {word}"
             for kind, word in (("refused", "refused"), ("failed", "failed (a compiler bug)"))
             if any(r.get(kind) for _, r in targets) and (named or kind == "failed")]
    if not said:
        final = report.get("final")
        said = ["the deployed graph differs from the source" if isinstance(final, dict)
                and final.get("equivalent") is False else "a target's check failed"]
    return f" ({'; '.join(said)}: the lines above give the reason and the remedy)"


def _verdict(c: dict) -> str:
    return (f"{'equivalent' if c['equivalent'] else 'NOT equivalent'} to the PyTorch source: "
            f"{c['spikes_compared']:,} spikes and {c['values_compared']:,} values compared, "
            f"{c['spike_mismatches']} spike mismatches, max rel diff {c['max_rel_diff']:.2g}")


def _no_weights_lines(report: dict) -> list[str]:
    """A factory compiled without ``--weights`` is its initial weights: said, with how to pass trained ones."""
    model = str(report.get("model") or "")
    if report.get("weights") or model.endswith(".nir") or (report.get("provenance") or {}).get("instance"):
        return []  # trained weights given, a NIR file's own, or a module instance's own
    seed = (report.get("input") or {}).get("seed", 0)
    return [f"  weights    warning: no --weights: compiled the initial weights of {model}() as built under "
            f"torch.manual_seed({seed}) (--seed; two runs agree); to compile a trained model pass --weights CKPT, a "
            "state_dict saved with torch.save(model.state_dict(), CKPT)"]


def targets_lines(report: dict) -> list[str]:
    """``target     ...`` for none or one target (as before several); ``targets`` and one line each for several."""
    targets = report.get("targets")
    if not isinstance(targets, dict) or len(targets) <= 1:
        one = next(iter(targets.values())) if isinstance(targets, dict) and targets else report.get("target")
        return [f"  target     {target_text(one)}"]
    return [f"  {'targets' if i == 0 else '':<10} {target_text(t)}" for i, t in enumerate(targets.values())]


def target_text(target: dict | None) -> str:
    """One line: the target and each verdict it reports (exact / bit_exact / spike_exact, consumers)."""
    if not target:
        return "none"
    if isinstance(target.get("summary"), str):  # a target's own account, already formatted
        return target["summary"]
    verdicts = [f"{k} {str(target[k]).lower()}" for k in ("exact", "bit_exact", "spike_exact") if k in target]
    for name, c in (target.get("consumers") or {}).items():
        verdicts.append(f"{name}: " + (f"spike_exact {str(c.get('spike_exact')).lower()}" if c.get("ran")
                                       else f"not run ({c.get('reason', 'unknown')[:80]})"))
    return f"{target['name']}: " + "; ".join(verdicts) if verdicts else target["name"]


def _stepping_lines(report: dict) -> list[str]:
    """The model convention and, when it is not float64, how the source's own precision agrees with the proof."""
    f = report["frontend"]
    lines = []
    if f.get("stepping"):
        static = " (a static input, repeated each step)" if f.get("static_input") else ""
        lines.append(f"  stepping   {f['stepping']}{static}")
    p = report.get("source_precision") or {}
    if p.get("error"):
        lines.append(f"  precision  the source could not run in {p.get('dtype')}: {p['error']}")
    elif p and p.get("dtype") != "float64":
        lines.append(f"  precision  the source run in {p['dtype']} agrees with the float64 proof on "
                     f"{p['values'] - p['disagreements']:,} of {p['values']:,} output values "
                     f"({p['disagreements']:,} disagree)")
    return lines
