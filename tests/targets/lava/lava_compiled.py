"""Lava compiles shared between tests: one compile per distinct ``CompileOptions`` in a test process.

A Lava compile costs 5-30 s (Lava's runtime start and its simulation); tests asserting different facts of the
same compile (same model, seed, batch, passes) share it instead of compiling it again. A sharing test only reads
the ``Compiled`` and writes copies of it (``write_outdir`` into its own ``tmp_path``). A failed compile is not
kept: each test asking for it compiles and fails on its own. ``make test`` gives each pytest-xdist worker whole
files, so tests of one file share within it.
"""
import functools


@functools.cache
def compiled(options):
    from spikec.app.driver import compile_model
    return compile_model(options)


def lava(model: str, **kw):
    """The Lava compile of ``model`` with ``kw`` (CompileOptions' fields), shared."""
    from spikec.app.driver import CompileOptions
    return compiled(CompileOptions(model=model, target="lava", **kw))
