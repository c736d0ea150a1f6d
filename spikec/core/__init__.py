"""Compiler core: IR, frontend, reference interpreter, equivalence checker, pass manager, driver, CLI."""
