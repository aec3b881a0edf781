"""``python -m streamsim.native``: which path the compiled stages take here, and why."""
from __future__ import annotations

import os

from . import built, modules, path

if __name__ == "__main__":
    why = ("not built (no C compiler when streamsim was installed)" if not built() else
           "STREAMSIM_NATIVE=0" if path() == "python" else
           f"built ({', '.join(modules())}), STREAMSIM_NATIVE="
           f"{os.environ.get('STREAMSIM_NATIVE', 'unset')}")
    print(f"{path()}: {why}")
