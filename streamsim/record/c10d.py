"""The c10d ops a dispatch mode sees, and what each reads and writes.

``torch.distributed``'s functions reach the dispatcher as ``c10d::`` ops (``c10d.send``,
``c10d.allreduce_``, ...), from Python and C++ callers alike. Their schemas carry no write
annotations (a receive's ``Tensor[] tensors`` says nothing of being written), so this table
says, per op: the op-log kind it becomes, which positional arguments it reads and writes, and
where its peer or root is. ``reduce``, ``gather``, ``scatter`` and ``barrier`` are op-log kinds
of their own (with the root, a global rank, as ``root``); ``monitored_barrier`` is a ``barrier``
the host waits inside. A receive from any source (``recv_any_source_``: ``dist.recv`` or
``dist.irecv`` without ``src``) is an ``irecv`` whose peer is the source the program observed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..oplog.schema import ANY_SOURCE_NAME


@dataclass(frozen=True)
class C10dOp:
    """One c10d op: op-log ``kind`` and ``label``; argument indices it reads and writes (nested
    tensor lists included); ``peer``: the index of a p2p op's peer (a group rank); ``root``:
    of a rooted op's root; ``root_only``: ``"reads"``/``"writes"``, the side only the root has;
    ``blocking``: the op returns no Work, the host waits inside it."""

    kind: str
    label: str
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    peer: int | None = None
    root: int | None = None
    root_only: str | None = None
    blocking: bool = False
    any_source: bool = False  # a receive whose peer is known only once it completed


OPS: dict[str, C10dOp] = {
    "send": C10dOp("isend", "isend", reads=(0,), peer=2),
    "recv_": C10dOp("irecv", "irecv", writes=(0,), peer=2),
    "allreduce_": C10dOp("all_reduce", "all_reduce", reads=(0,), writes=(0,)),
    "allreduce_coalesced_": C10dOp("all_reduce", "all_reduce_coalesced", reads=(0,), writes=(0,)),
    "broadcast_": C10dOp("broadcast", "broadcast", reads=(0,), writes=(0,), root=2,
                         root_only="reads"),
    "allgather_": C10dOp("all_gather", "all_gather", reads=(1,), writes=(0,)),
    "_allgather_base_": C10dOp("all_gather", "all_gather_into_tensor", reads=(1,), writes=(0,)),
    "allgather_coalesced_": C10dOp("all_gather", "all_gather_coalesced", reads=(1,), writes=(0,)),
    "allgather_into_tensor_coalesced_": C10dOp("all_gather", "all_gather_into_tensor_coalesced",
                                               reads=(1,), writes=(0,)),
    "reduce_scatter_": C10dOp("reduce_scatter", "reduce_scatter", reads=(1,), writes=(0,)),
    "_reduce_scatter_base_": C10dOp("reduce_scatter", "reduce_scatter_tensor", reads=(1,),
                                    writes=(0,)),
    "reduce_scatter_tensor_coalesced_": C10dOp("reduce_scatter", "reduce_scatter_coalesced",
                                               reads=(1,), writes=(0,)),
    "alltoall_": C10dOp("all_to_all", "all_to_all", reads=(1,), writes=(0,)),
    "alltoall_base_": C10dOp("all_to_all", "all_to_all_single", reads=(1,), writes=(0,)),
    "reduce_": C10dOp("reduce", "reduce", reads=(0,), writes=(0,), root=3,
                      root_only="writes"),
    "gather_": C10dOp("gather", "gather", reads=(1,), writes=(0,), root=3,
                      root_only="writes"),
    "scatter_": C10dOp("scatter", "scatter", reads=(1,), writes=(0,), root=3,
                       root_only="reads"),
    "barrier": C10dOp("barrier", "barrier"),
    "monitored_barrier_": C10dOp("barrier", "monitored_barrier", blocking=True),
    "recv_any_source_": C10dOp("irecv", ANY_SOURCE_NAME, writes=(0,), any_source=True),
}
# Seen and not recorded, with the reason a report of the recording gives.
UNSUPPORTED: dict[str, str] = {}
GROUP_ARG = {name: 1 if name in ("send", "recv_", "allreduce_", "allreduce_coalesced_",
                                 "broadcast_", "reduce_", "barrier", "monitored_barrier_",
                                 "recv_any_source_")
             else 2 for name in OPS}  # where the ProcessGroup is in each op's arguments


def sides(op: C10dOp, args: tuple, my_group_rank: int) -> tuple[list, list]:
    """The (read, written) argument values of one call (each a tensor or nested lists)."""
    is_root = op.root is None or args[op.root] == my_group_rank
    reads = [args[i] for i in op.reads] if is_root or op.root_only != "reads" else []
    writes = [args[i] for i in op.writes] if is_root or op.root_only != "writes" else []
    return reads, writes
