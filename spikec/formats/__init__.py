"""File formats spikec reads and writes, below the frontend and the targets that use them."""
