"""Text lines for the compile summary from the report's ``ttfs`` object (``spikec compile --coding ttfs``)."""


def summary_lines(t: dict) -> list[str]:
    s = t["spikes"]
    exact = "exact" if t["exact"] else "APPROXIMATE (LayerNorm: fitted 1/sqrt)"
    lines = [f"  ttfs       {exact}; {'verified' if t['verified'] else 'NOT verified'}: max error "
             f"{t['max_abs_error']:.3g} (activation units), {t['max_rel_window_error']:.2g} of the window "
             f"(tolerance {t['tolerance']:.0e}) over unclipped neurons; clipped {100 * t['clipped_fraction']:.4f}%",
             f"             coding {'/'.join(t['coding'])}, tau_c {t['tau_c']:g}, window {t['window']:g}, "
             f"latency {t['latency']:g} ({len(t['layers'])} layers incl. input); IR vs event-driven simulator "
             f"{t['ir_vs_simulator_max_rel_window_error']:.2g} of the window",
             f"             spikes {s['spikes_per_inference']:.1f} per inference over {s['neurons']} neurons "
             f"({s['spikes_per_neuron']:.3f} per neuron, max {s['max_spikes_per_neuron']} per neuron); "
             f"{s['synaptic_events_per_inference']:.0f} synaptic events per inference"]
    for l in t["layers"]:
        srcs = ", ".join(f"{k}" + (f" (+{d:g} delay)" if d else "") for k, d in l["sources"].items())
        lines.append(f"             {l['name']:<22} {l['kind']:<16} {l['coding']:<6} {l['neurons']:>5} neurons "
                     f"[{l['t_min']:g}, {l['t_max']:g}] ref {l['t_ref']:g} scale {l['scale']:.4g} "
                     f"{l['spikes_per_neuron']:.3f} spikes/neuron" + (f" <- {srcs}" if srcs else ""))
    for d in t["discrete"]:
        acc = f", accuracy {100 * d['accuracy']:.2f}%" if "accuracy" in d else ""
        lines.append(f"  ttfs dt    dt {d['dt']:g} ({d['states_per_neuron']:g} states per neuron): max output "
                     f"error {d['output_max_abs_error']:.3g} (worst-case bound {d['worst_case_output_error_bound']:.3g}"
                     f"{', vacuous' if d.get('bound_is_vacuous') else ''}){acc}")
    a = t.get("accuracy")
    if a:
        dec = f", decomposed ANN {100 * a['ann_decomposed']:.2f}%" if "ann_decomposed" in a else ""
        lines.append(f"  accuracy   {a['samples']} evaluation samples: ANN {100 * a['ann']:.2f}%{dec}, TTFS (exact "
                     f"event-driven) {100 * a['ttfs']:.2f}%, prediction agreement "
                     f"{100 * a['prediction_agreement']:.2f}%")
    for ap in t["approximations"]:
        m = ap["measured"]
        worst = max(v["max_abs_error"] for v in m.values())
        cum = max(v["cumulative_max_abs_error"] for v in m.values())
        outside = sum(v["rows_outside_domain"] for v in m.values())
        lines.append(f"  APPROX     {ap['node']}: {ap['kind']} ({ap['rsqrt_hidden']} hidden, fit rel. error "
                     f"{ap['fit_max_rel_error']:.2g} on u in [{ap['fit_domain'][0]:.3g}, {ap['fit_domain'][1]:g}]); "
                     f"measured max |LN error| {worst:.3g} (with upstream approximations {cum:.3g}), {outside} rows "
                     f"outside the domain, {ap['neurons_per_row']} neurons per row; NOT exact")
    return lines
