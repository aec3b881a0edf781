"""``python -m streamsim``: the command line."""
import sys

from .cli.main import program

sys.exit(program())
