"""Kept for imports of ``spikec.compiler.driver``: the pipeline lives in ``spikec.app``."""
from spikec.app.driver import CompileOptions, Compiled, compile_model, load_source, make_inputs, write_outdir  # noqa: F401
from spikec.app.verify import verify_outdir  # noqa: F401
