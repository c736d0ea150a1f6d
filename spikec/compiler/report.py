"""What the compile report says about a graph: parameter accounting and the AC/MAC layer table."""
from torch import nn

from spikec.compiler.ir import Graph
from spikec.ops import OPS, deployed_params


def source_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _in_scope(scope: str, module: str) -> bool:
    return scope == module or scope.startswith(module + ".")


def params_report(model: nn.Module, graph: Graph) -> dict:
    """Trainable parameters of the source vs parameters the deployed graph stores (buffers excluded)."""
    by_module = {name: {"source": source_params(child),
                        "deployed": sum(deployed_params(n) for n in graph.nodes if _in_scope(n.scope, name))}
                 for name, child in model.named_children()}
    return {"source": source_params(model), "deployed": sum(deployed_params(n) for n in graph.nodes),
            "by_module": by_module}


def synaptic_kind(graph: Graph, node) -> str | None:
    """AC when every input of a synaptic op is a binary spike tensor, MAC otherwise; None for other ops."""
    if node.op == "input" or not OPS[node.op].synaptic:
        return None
    kinds = [graph.node(i).type.kind for i in node.inputs]
    if node.op == "windowsum":  # an all-ones kernel: additions only, spike-gated on any spike input
        return "AC" if all(k != "real" for k in kinds) else "MAC"
    return "AC" if all(k == "binary" for k in kinds) else "MAC"


def product_kind(graph: Graph, node) -> str | None:
    """How an element-wise product of spike tensors runs; nothing dense is called spike-driven."""
    if node.op == "sdna_pairwise":
        return "pairwise integer spike products Q_i*K_j and a_ij*V_j: not spike-driven"
    if node.op != "mul":
        return None
    types = [graph.node(i).type for i in node.inputs]
    if all(t.kind == "binary" for t in types):
        return "coincidence (AND) of binary spikes: spike-driven"
    if all(t.is_spike for t in types):
        d = " x ".join(str(t.ceiling or 1) for t in types)
        return f"integer spike product: not spike-driven (after unrolling a {d} sub-step coincidence sum)"
    return "dense product (real operand): not spike-driven"


def lowering(node) -> str | None:
    if node.op == "intfire" and node.attrs.get("output", "spikes") == "spikes":
        return f"integer spikes 0..{node.attrs['max_spikes']} (graded payload)"
    if node.op == "intfire_unrolled":
        return f"binary spikes over {node.attrs['max_spikes']} virtual sub-steps"
    return None


def layers_report(graph: Graph) -> list[dict]:
    rows = []
    for n in graph.nodes:
        if n.op == "input":
            continue
        kinds = sorted({graph.node(i).type.kind for i in n.inputs})
        row = {"name": n.name, "op": n.op, "scope": n.scope, "shape": list(n.type.shape),
               "output_kind": n.type.kind, "substeps": n.type.substeps,
               "operand_kind": kinds[0] if len(kinds) == 1 else "/".join(kinds),
               "synaptic_kind": synaptic_kind(graph, n)}
        extra = {"product": product_kind(graph, n), "lowering": lowering(n),
                 "host": True if OPS[n.op].dense else None}
        rows.append({**row, **{k: v for k, v in extra.items() if v is not None}})
    return rows


def summary_text(report: dict) -> str:
    p = report["params"]
    lines = [f"spikec: {report['model']}",
             f"  input      [T={report['input']['steps']}, B={report['input']['batch']}, "
             f"{', '.join(map(str, report['input']['shape']))}] {report['input']['kind']} ({report['input']['source']})",
             f"  frontend   {_verdict(report['frontend'])}",
             f"  params     source {p['source']:,} -> deployed {p['deployed']:,}"]
    for name, c in p["by_module"].items():
        lines.append(f"             {name:<12} {c['source']:>9,} -> {c['deployed']:,}")
    for r in report["passes"]:
        skipped = f", {len(r['skipped'])} skipped" if r["skipped"] else ""
        lines.append(f"  pass       {r['name']:<16} {len(r['nodes_changed'])} nodes changed{skipped}, params "
                     f"{r['params_before']:,} -> {r['params_after']:,}; spike mismatches {r['spike_mismatches']}, "
                     f"max rel diff {r['max_rel_diff']:.2g} ({r['seconds']:.2f} s)")
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
        from spikec.ttfs.report import summary_lines
        lines += summary_lines(report["ttfs"])
    lines.append(f"  deployed   {_verdict(report['final'])}")
    ties = report["final"].get("near_threshold")
    if ties is not None:
        probes = report["input"].get("probes") or 0
        lines.append(f"  margins    {ties['count']:,} neuron values within {ties['tolerance']:g} of their threshold "
                     f"({ties['exact_ties']:,} exact ties)" + (f"; {probes} probe samples appended to the inputs"
                                                              if probes else ""))
    lines.append(f"  target     {target_text(report['target'])}")
    lines.append(f"  equivalent {str(report['equivalent']).lower()}")
    return "\n".join(lines)


def _verdict(c: dict) -> str:
    return (f"{'equivalent' if c['equivalent'] else 'NOT equivalent'} to the PyTorch source: "
            f"{c['spikes_compared']:,} spikes and {c['values_compared']:,} values compared, "
            f"{c['spike_mismatches']} spike mismatches, max rel diff {c['max_rel_diff']:.2g}")


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
