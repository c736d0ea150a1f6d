"""The application layer: what only a whole compile knows (OUTDIR ownership, provenance, limits)."""
