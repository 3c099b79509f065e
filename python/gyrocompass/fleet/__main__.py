"""`python -m gyrocompass.fleet ARGS`: as `fusion-node fleet ARGS`."""
import sys

from .cli import _entry

sys.exit(_entry())
