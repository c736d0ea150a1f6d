"""Codings: how values become spikes beyond rate coding (``ttfs``). Above the frontend and the passes, below the targets."""
