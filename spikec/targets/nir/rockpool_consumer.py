"""Rockpool 3.1.0's ``rockpool.nn.modules.torch.nir.from_nir`` (the Xylo users' path) as a NIR consumer.

What its source does (``_convert_nir_to_rockpool``, ``lif_torch.LIFTorch.forward``, ``exp_syn_torch.ExpSynTorch``):

* ``LIF`` -> ``LIFNeuronTorch(tau_mem=node.tau_mem, ...)``: NIR's LIF has ``tau``, not ``tau_mem``, so every file
  with a LIF raises ``AttributeError`` at import.
* ``CubaLIF`` -> ``LIFTorch`` at its own ``dt = min(tau_mem / (1 + r))`` (not the file's), decays
  ``exp(-dt/tau)``, ignores ``w_in`` and ``r`` as gains, steps ``isyn = exp(-dt/tau_syn) (isyn + x)``,
  ``v = exp(-dt/tau_mem) v + isyn + v_leak``, fires ``floor(v / v_threshold)`` spikes when ``v >= v_threshold``
  and subtracts them times the threshold (NIR's CubaLIF fires once on ``v > v_threshold`` and resets to
  ``v_reset``).
* ``LI`` -> ``ExpSynTorch(tau=node.tau.int(), dt=min(tau / (1 + r)))``: ``tau`` truncated to whole seconds (a
  ``tau`` below 1 s is 0: the decay ``exp(-dt/0)`` is 0, or NaN).
* ``Affine`` / ``Linear`` -> ``LinearTorch``; a nested graph only as a 4-node recurrent CubaLIF; any other node
  raises ``NotImplementedError``.
* the graph is run by ``nirtorch.load`` (``consumers.executor_limits``), each module on the whole ``[B, T, N]``
  sequence in one call (Rockpool's modules evolve over time themselves): a cycle's edge, read from the previous
  call, carries nothing.

``run`` imports the file with ``from_nir`` and runs it that way, one call on the batch; ``tests/targets/nir/
test_nir_rockpool.py`` pins each limit on real runs, so a fixed Rockpool shows up.
"""
import nir
import numpy as np
import torch

NODES = ("Input", "Output", "Affine", "Linear", "LI", "LIF", "CubaLIF")
CALL = "rockpool.nn.modules.torch.nir.from_nir(nir.read(path)), one call on [B, T, N]"


def _kind(node) -> str:
    return type(node).__name__


def limits(graph: nir.NIRGraph, executor_limits, reaches) -> list[str]:
    """Every construct of ``graph`` Rockpool's ``from_nir`` raises on or runs differently (empty: it should run);
    ``executor_limits`` and ``reaches`` are ``consumers``' (passed in: that module imports this one)."""
    out = []
    for name, node in graph.nodes.items():
        k, where = _kind(node), f"node {name!r} ({_kind(node)})"
        if isinstance(node, nir.NIRGraph):
            out.append(f"{where}: Rockpool reads a nested graph only as a 4-node recurrent CubaLIF (LIFTorch)")
        elif k not in NODES:
            out.append(f"{where}: rockpool's from_nir has no mapping for it (raises NotImplementedError)")
        elif k == "LIF":
            out.append(f"{where}: rockpool's from_nir reads node.tau_mem, which NIR's LIF does not have "
                       "(AttributeError: the import fails)")
        elif k == "CubaLIF":
            out.append(f"{where}: Rockpool's LIFTorch runs at dt = min(tau_mem/(1 + r)), not the file's, decays "
                       "exp(-dt/tau), ignores w_in and r as gains, and fires floor(v/v_threshold) spikes on >= with a "
                       "subtract reset (NIR's CubaLIF fires once on > and resets to v_reset)")
        elif k == "LI":
            out.append(f"{where}: Rockpool's ExpSynTorch truncates tau to an integer (seconds) and runs at "
                       "dt = min(tau/(1 + r)), decaying exp(-dt/tau) after adding the input")
    cyclic = sorted(n for n in graph.nodes if any(s == n and reaches(graph, d, n) for s, d in graph.edges))
    if cyclic:
        out.append(f"a cycle through {cyclic}: Rockpool's modules evolve the whole sequence in one call, so the "
                   "cycle's edge (nirtorch reads it from the previous call) carries nothing")
    return out + executor_limits(graph)


def available() -> str | None:
    """None when Rockpool's torch NIR module imports (it needs no samna); else why not."""
    try:
        import rockpool.nn.modules.torch.nir  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"rockpool cannot be imported: {type(e).__name__}: {e}"
    return None


def run(graph: nir.NIRGraph, inputs: np.ndarray, out_shape) -> tuple[np.ndarray, dict]:
    """``from_nir(graph)`` on ``inputs [T, B, N]`` in one call on ``[B, T, N]``: the output ``[T, B, *out_shape]``
    and every LIFTorch's spike counts ``[T, B, N]`` (hooked by NIR name)."""
    from rockpool.nn.modules.torch.nir import from_nir
    module = from_nir(graph)
    wanted = {n.replace(".", "_"): n for n, v in graph.nodes.items() if _kind(v) in ("LIF", "CubaLIF")}
    seen, hooks = {}, []
    for name, m in module.named_modules():
        if name in wanted:
            hooks.append(m.register_forward_hook(lambda mod, i, o, n=wanted[name]: seen.__setitem__(
                n, (o[0] if isinstance(o, tuple) else o).detach().double())))
    T, B = inputs.shape[:2]
    x = torch.as_tensor(np.moveaxis(inputs, 0, 1).reshape(B, T, -1), dtype=torch.float32)
    try:
        with torch.no_grad():
            y = module(x)
    finally:
        for h in hooks:
            h.remove()
    y = y[0] if isinstance(y, tuple) else y
    if y.numel() != T * B * int(np.prod(out_shape)):
        raise ValueError(f"its module returned a {tuple(y.shape)} tensor, not [B, T] x the graph output's "
                         f"{tuple(out_shape)}")
    outs = np.moveaxis(y.double().numpy().reshape(B, T, *out_shape), 0, 1)
    return outs, {k: np.moveaxis(v.numpy().reshape(B, T, -1), 0, 1) for k, v in seen.items()}
