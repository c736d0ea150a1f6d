"""The rewrite passes, one module each (named verb_object), and their registry.

``DEFAULT`` is the order ``--passes default`` runs them in.
"""
from spikec.ir.errors import BadInput
from spikec.core.passes import Pass
from spikec.passes.fold_batchnorm import FOLD_BATCHNORM
from spikec.passes.fuse_repconv import FUSE_REPCONV
from spikec.passes.tdm_dual_kernel import TDM_DUAL_KERNEL
from spikec.passes.reassociate_attention import REASSOCIATE_ATTENTION
from spikec.passes.unroll_virtual_steps import UNROLL_VIRTUAL_STEPS

PASSES: dict[str, Pass] = {p.name: p for p in (FOLD_BATCHNORM, FUSE_REPCONV, TDM_DUAL_KERNEL, UNROLL_VIRTUAL_STEPS,
                                               REASSOCIATE_ATTENTION)}
DEFAULT: tuple[str, ...] = ("fuse_repconv", "fold_batchnorm", "tdm_dual_kernel", "unroll_virtual_steps",
                            "reassociate_attention")


def select(spec: str) -> tuple[list[Pass], bool]:
    """``default`` | ``none`` | ``a,b,c`` -> (passes, explicitly named?)."""
    if spec == "default":
        return [PASSES[n] for n in DEFAULT], False
    if spec == "none":
        return [], False
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in PASSES]
    if unknown or not names:
        raise BadInput(f"unknown pass(es) {unknown or spec!r}",
                       remedy=f"use default, none, or a comma-separated list of: {', '.join(PASSES)}")
    return [PASSES[n] for n in names], True
