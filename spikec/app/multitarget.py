"""Several targets in one compile: ``--target lava,nir,onnx`` or ``--target all``.

Each target is emitted from the same deployed graph and checked against the same reference run; its report
goes into ``report["targets"][name]``. A target that cannot map the graph raises ``UnsupportedOp``: that is a
*refusal*, recorded with its reason. Whether a refusal fails the compile depends on how the target was asked for:
by name (``lava``, ``lava,nir``) it does (the compile is not equivalent, exit 1); under ``all`` it is reported
and does not (``all`` means "every target that can take this graph"). Inputs a target cannot take (another
``BadInput``, e.g. values beyond Lava's bit widths) are bad input when the target was named (exit 2), and a
refusal under ``all``. Artifacts of several targets live side by
side in OUTDIR; two targets writing the same file name is a compiler bug and is refused.

A target that fails *internally* (any other exception: a compiler bug, not the user's input) is recorded as
failed in its report (``internal``, the error class, the node when known, the traceback) and the other targets
are still emitted, checked and written; the compile then exits 3 (``InternalError``), naming the target. A
named target's internal failure makes the compile not equivalent; under ``all`` it does not (nothing was claimed).
"""
import traceback
from dataclasses import dataclass, field

from spikec.ir.errors import BadInput, InternalError, IRError, SpikecError, UnsupportedOp
from spikec.ir.graph import Node
from spikec.targets import KNOWN, get_target

ALL = "all"
FORMS = (f"give none | all | {' | '.join(KNOWN)} | a comma-separated list of targets such as lava,nir,onnx "
         "(each named once)")


@dataclass(frozen=True)
class TargetPlan:
    """Which targets a ``--target`` value asks for, and whether by name (a refusal then fails the compile)."""
    names: tuple[str, ...]
    named: bool

    @property
    def single(self) -> str | None:
        """The one target's name when exactly one was named (``report["target"]`` keeps its old meaning)."""
        return self.names[0] if self.named and len(self.names) == 1 else None


def plan(spec) -> TargetPlan:
    """``none`` | ``all`` | ``name`` | ``a,b,c`` (or a tuple/list of names) -> a ``TargetPlan``; BadInput else.

    Every named target is loaded here (an unknown or uninstalled one is refused before any work)."""
    if isinstance(spec, (tuple, list)):
        if not spec:
            return TargetPlan((), True)
        if any(not isinstance(s, str) for s in spec):
            raise BadInput(f"targets {spec!r} must be names (strings)", remedy="e.g. targets=('lava', 'nir', 'onnx')")
        spec = ",".join(spec)
    if not isinstance(spec, str):
        raise BadInput(f"target {spec!r} is not a name", remedy="give none, all, or names like lava,nir,onnx")
    if spec == "none":
        return TargetPlan((), True)
    if spec == ALL:
        for name in KNOWN:
            get_target(name)
        return TargetPlan(KNOWN, False)
    names = tuple(spec.split(",")) if "," in spec else (spec,)
    for name in names:
        if name in ("none", ALL):
            raise BadInput(f"target {name!r} cannot be combined with other targets (in {spec!r})",
                           remedy=f"give {name} alone, or a list of targets such as lava,nir,onnx")
        try:
            get_target(name)  # BadInput naming an unknown or unavailable target (including '' from 'lava,,nir')
        except BadInput as e:
            remedy = e.remedy if name in KNOWN else FORMS  # an unknown name: every form the option takes
            if len(names) == 1:
                raise BadInput(e.what, where=e.where, remedy=remedy) from e
            raise BadInput(f"{e.what} (in --target {spec!r})", where=e.where, remedy=remedy) from e
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadInput(f"target {twice[0]!r} is named twice in {spec!r}", remedy="name each target once")
    return TargetPlan(names, True)


@dataclass
class TargetsRun:
    """What the targets did: each one's report, whether they all hold as asked, and their files."""
    reports: dict = field(default_factory=dict)
    ok: bool = True
    files: dict = field(default_factory=dict)


def refused(name: str, why: str, error: str = "UnsupportedOp") -> dict:
    return {"name": name, "emitted": False, "refused": True, "reason": why, "error": error,
            "summary": f"{name}: refused: {why.splitlines()[0]}"}


BUG_REMEDY = ("this is a compiler bug: report it with the model (spikec --debug compile ... shows the traceback); "
              "the other targets are not affected: compile without this one meanwhile")


def _node_of(tb) -> str | None:
    """The IR node the innermost frame of ``tb`` that holds one was working on (a target's loop variable)."""
    found = None
    while tb is not None:
        found = next((v.name for v in tb.tb_frame.f_locals.values() if isinstance(v, Node)), found)
        tb = tb.tb_next
    return found


def internal_failure(name: str, e: BaseException) -> dict:
    """The report of target ``name`` that failed with ``e``, a compiler bug (not a refusal: nothing was decided)."""
    node = e.where if isinstance(e, InternalError) and e.where else _node_of(e.__traceback__)
    what = f"{type(e).__name__}: {e.what if isinstance(e, SpikecError) else e}"  # its remedy is BUG_REMEDY
    message = f"internal error: target {name}" + (f", node {node!r}" if node else "") + f", exception {what}"
    return {"name": name, "emitted": False, "refused": False, "failed": True, "internal": True,
            "error": type(e).__name__, "node": node, "reason": message, "remedy": BUG_REMEDY,
            "traceback": "".join(traceback.format_exception(e)),
            "summary": f"{name}: FAILED, {message.splitlines()[0]} (a compiler bug)"}


def internal_failures(reports: dict) -> list[dict]:
    """The target reports that record an internal failure (a compiler bug), in target order."""
    return [r for r in reports.values() if isinstance(r, dict) and r.get("internal") is True]


def run_targets(targets: TargetPlan, deployed, x, reference, options: dict, raise_refusals: bool,
                no_lowering: dict | None = None) -> TargetsRun:
    """Emit and check every target of ``targets``; ``no_lowering`` maps targets known in advance to refuse (a
    coding without their lowering) to the reason. ``raise_refusals``: a named target's refusal raises (the
    driver's historical behaviour for a single target) instead of being recorded as a failure."""
    result = TargetsRun()
    for name in targets.names:
        if no_lowering and name in no_lowering:
            result.reports[name] = refused(name, no_lowering[name], "BadInput")
            continue
        try:
            emitted = get_target(name)(deployed, x, reference, dict(options))
        except BadInput as e:  # UnsupportedOp: the graph; other BadInput: inputs this target cannot take
            if targets.named and (raise_refusals or not isinstance(e, UnsupportedOp)):
                raise
            result.reports[name] = refused(name, e.message(), type(e).__name__)
            result.ok = result.ok and not targets.named
            continue
        except MemoryError:  # this machine, not the target: the CLI says so (exit 2)
            raise
        except Exception as e:  # the target broke on a graph it accepted: a compiler bug, the others still run
            failure = internal_failure(name, e)
            if raise_refusals and targets.named:
                raise InternalError(failure["reason"], remedy=BUG_REMEDY) from e
            result.reports[name] = failure
            result.ok = result.ok and not targets.named
            continue
        result.reports[name] = emitted.report
        result.ok = result.ok and emitted.ok
        clash = sorted(set(emitted.files) & set(result.files))
        if clash:
            raise IRError(f"targets write the same OUTDIR file {clash[0]!r} (target {name!r} and one before it)",
                          remedy="this is a compiler bug: report it; compile those targets separately meanwhile")
        result.files.update(emitted.files)
    return result


def not_emitted(targets: TargetPlan, front_ok: bool) -> TargetsRun:
    """Every target skipped: the graph failed its own proof, so a target's verdict on it would mean nothing."""
    why = "the traced graph is not equivalent to the source" if not front_ok else \
        "the deployed graph is not equivalent to the source"
    reports = {name: {"name": name, "emitted": False, "summary": f"{name}: not emitted ({why})"}
               for name in targets.names}
    return TargetsRun(reports, not targets.names)


def is_refused(report) -> bool:
    return isinstance(report, dict) and report.get("refused") is True
