"""The comm/compute overlap metric counts a comm op only while it transfers: from its transfer
start (a rendezvous send once its receive is posted, a receive once the data leaves, a collective
once every rank joined) to its end, not while it waits for its peer. The demo's 45.5% was mostly a
512-byte gloo metadata send blocked 1.87 s in a rendezvous beside compute."""
from __future__ import annotations

import pytest

from streamsim.analysis.metrics import compute_metrics
from streamsim.trace import TRANSFER_START, transfer_start

MB = 1 << 20
PP = ("pp", [0, 1], {"eager_bytes": 0})  # every send rendezvouses
XFER = 10 + MB / 25_000  # the default NCCL cost of 1 MiB: 51.9 us


def late_receiver(host):
    host.sleep(500)
    host.group("pp").irecv(host.buffer("y", MB), src=0).wait()


def test_a_send_waiting_in_a_rendezvous_beside_compute_is_no_overlap(eng):
    """Rank 0's send waits 500 us for the receive while rank 0 computes for 400 us, then
    transfers alone: nothing overlapped a transfer (it read 66% before)."""
    def sender(host):
        host.group("pp").isend(host.buffer("x", MB), dst=1)
        host.launch("compute", dur=400)

    tr = eng.simulate(sender, late_receiver, groups=(PP,))
    send = eng.one(tr, "rank0/nccl:pp", kind="isend")
    assert (send.start, send.attrs[TRANSFER_START], send.end) == pytest.approx((0, 500, 500 + XFER))
    recv = eng.one(tr, "rank1/nccl:pp", kind="irecv")
    assert TRANSFER_START not in recv.attrs and transfer_start(recv) == recv.start == 500
    assert compute_metrics(tr).comm_overlap_share == 0.0


def test_a_receive_waiting_for_the_data_is_busy_only_once_the_data_leaves(eng):
    """Rank 1 posts its receive at once and computes 520 us; the data leaves rank 0 at 500 us:
    the receive transfers over [500, 551.9], of which 20 us overlap rank 1's compute."""
    def sender(host):
        host.sleep(500)
        host.group("pp").isend(host.buffer("x", MB), dst=1)

    def receiver(host):
        work = host.group("pp").irecv(host.buffer("y", MB), src=0)
        host.launch("compute", dur=520)
        work.wait()

    tr = eng.simulate(sender, receiver, groups=(PP,))
    recv = eng.one(tr, "rank1/nccl:pp", kind="irecv")
    assert (recv.start, recv.attrs[TRANSFER_START]) == (0, 500)
    # rank 0's send transfers with no compute beside it; rank 1's receive 20 of its 51.9 us
    assert compute_metrics(tr).comm_overlap_share == pytest.approx(20 / (2 * XFER))


def test_a_collective_transfers_once_the_last_rank_joined(eng):
    def early(host):
        host.group("pp").all_reduce(host.buffer("g", MB))
        host.launch("compute", dur=300)

    def late(host):
        host.sleep(300)
        host.group("pp").all_reduce(host.buffer("g", MB))

    tr = eng.simulate(early, late, groups=(PP,))
    first = eng.one(tr, "rank0/nccl:pp", kind="all_reduce")
    assert (first.start, first.attrs[TRANSFER_START]) == (0, 300)
    assert TRANSFER_START not in eng.one(tr, "rank1/nccl:pp", kind="all_reduce").attrs
    assert compute_metrics(tr).comm_overlap_share == 0.0


def test_a_gloo_object_send_blocked_in_a_rendezvous_is_no_overlap(eng):
    """The demo's case: a small ``isend_object`` (gloo eager threshold 0) whose receiver posts
    ``recv_object`` late, while the sender's compute runs; its busy time still counts."""
    def sender(host):
        host.group("cpu").isend_object(512, dst=1)
        host.launch("compute", dur=400)

    def receiver(host):
        host.sleep(900)
        host.group("cpu").recv_object(0)

    tr = eng.simulate(sender, receiver, groups=(("cpu", [0, 1], {"backend": "gloo",
                                                                 "eager_bytes": 0}),))
    send = eng.one(tr, "rank0/gloo:cpu", kind="isend_object")
    assert (send.start, send.attrs[TRANSFER_START]) == (0, 900)
    m = compute_metrics(tr)
    assert m.comm_overlap_share == 0.0
    assert m.busy_us["rank0/gloo:cpu"] == pytest.approx(send.end)  # (occupied from its start)


def test_a_transfer_beside_compute_is_overlap(eng):
    """An eager send (no wait) during a longer kernel: all of it overlaps."""
    def sender(host):
        host.group("pp").isend(host.buffer("x", MB), dst=1)
        host.launch("compute", dur=400)

    tr = eng.simulate(sender, late_receiver, groups=(("pp", [0, 1], {"eager_bytes": 2 * MB}),))
    assert TRANSFER_START not in eng.one(tr, "rank0/nccl:pp", kind="isend").attrs
    # rank 0's send [0, 51.9] under compute; rank 1's receive at 500, after the data arrived,
    # takes no time
    assert compute_metrics(tr).comm_overlap_share == 1.0
