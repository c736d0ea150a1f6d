"""The IR: graph, nodes, tensor types (``graph``) and the error classes (``errors``). Imports nothing of spikec above it."""
