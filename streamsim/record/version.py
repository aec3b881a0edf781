"""The torch versions the recorder is tested on, checked when recording starts.

The recorder leans on private PyTorch interfaces (``TorchDispatchMode`` seeing ``c10d`` ops, the
boxed ``Work`` objects those ops return, ``torch.cuda._gpu_trace``): they change between
releases without notice, so a torch outside the tested range is refused with a clear message
rather than recorded wrongly.
"""
from __future__ import annotations

from ..sim.errors import ModelError

SUPPORTED = ((2, 13), (2, 14))  # (major, minor) of the oldest and newest torch tested


class RecordError(ModelError):
    """A recording cannot start or finish (no torch, an unsupported one, no rank file): one line,
    exit code 2, as any other mistake in streamsim's input."""


def supported_range() -> str:
    lo, hi = SUPPORTED
    return f"{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}"


def check_version(version: str) -> None:
    """Refuse a torch ``version`` string (``"2.13.0+cpu"``) outside :data:`SUPPORTED`."""
    try:
        major, minor = (int(x) for x in version.split("+")[0].split(".")[:2])
    except ValueError:
        raise RecordError(f"streamsim record: cannot read torch's version {version!r}") from None
    if not SUPPORTED[0] <= (major, minor) <= SUPPORTED[1]:
        raise RecordError(f"streamsim record supports torch {supported_range()} (it uses private "
                          f"dispatch and c10d interfaces tested there); this is torch {version}")


def require_torch():
    """Import torch and check its version; the module, or a RecordError saying what to install."""
    try:
        import torch
    except ImportError:
        raise RecordError("streamsim record needs PyTorch: pip install 'streamsim[record]' "
                          f"(torch {supported_range()})") from None
    check_version(torch.__version__)
    return torch
