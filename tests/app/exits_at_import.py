"""A model file that exits with status 3 when imported (a script without a __main__ guard)."""
import sys

sys.exit(3)


def model():  # never reached
    return None
