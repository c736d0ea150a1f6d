"""Kept so that ``python -m spikec.compiler.cli`` still works: the CLI lives in ``spikec.app.cli``."""
from spikec.app.cli import main, run  # noqa: F401

if __name__ == "__main__":
    run()
