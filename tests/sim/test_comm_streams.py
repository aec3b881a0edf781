"""A process group's comm streams as a model reaches them: ``host.group(G).comm_stream(peer)``
returns the stream the group's ops run on (for ``record_stream``, events), and a stream name that
starts with ``nccl:``/``gloo:`` but is no declared group's comm stream is an error, not a new
empty stream (a typo in ``record_stream(buf, "nccl:pp")`` silently ordered nothing)."""
from __future__ import annotations

import pytest

from streamsim import ModelError
from streamsim.analysis.checks import analyse

MB = 1 << 20
PP = ("pp", [0, 1], {"p2p_streams": "per_pair"})


def send_then_free(record):
    """Rank 0 sends x (8 MiB: rendezvous, rank 1 receives late) and frees it at once;
    ``record(host, group, buf)`` runs between the send and the free."""
    def stage0(host):
        x = host.buffer("x", 8 * MB)
        host.launch("produce", writes=[x], dur=100)
        g = host.group("pp")
        g.isend(x, dst=1)
        record(host, g, x)
        host.free(x)

    def stage1(host):
        host.sleep(5_000)
        host.group("pp").irecv(host.buffer("y", 8 * MB), src=0).wait()
    return stage0, stage1


@pytest.mark.parametrize("group, peer, stream", [
    (("pp", [0, 1], {}), None, "nccl:pp"),
    (("pp", [0, 1], {}), 1, "nccl:pp"),  # per_group: p2p on the group's own stream
    (PP, 1, "nccl:pp:0-1"),
    (PP, None, "nccl:pp"),  # (the collectives' stream)
])
def test_comm_stream_is_the_stream_the_send_runs_on_and_record_stream_on_it_orders_the_free(
        eng, group, peer, stream):
    def record(host, g, x):
        s = g.comm_stream(peer)
        assert s.name == stream
        host.record_stream(x, s)

    tr = eng.simulate(*send_then_free(record), groups=(group,))
    send = next(op for op in tr.ops if op.kind == "isend" and op.agent.kind == "stream")
    free = eng.one(tr, "rank0/compute", kind="free")
    hazards = [h.kind for h in analyse(tr).hazards]
    if send.agent.name == stream:  # the free waits for the send: no use-after-free left
        assert free.after == (send.id,) and free.start == send.end and hazards == []
    else:  # per_pair, the group's own stream recorded: the send's pair stream is not waited
        assert (group, peer) == (PP, None) and hazards == ["use-after-free"]


def test_a_gloo_groups_comm_stream_is_its_isend_object_channel(eng):
    def prog0(host):
        g = host.group("cpu")
        g.isend_object(512, dst=1)
        assert g.comm_stream().name == g.comm_stream(1).name == "gloo:cpu"

    tr = eng.simulate(prog0, lambda host: host.group("cpu").recv_object(0),
                      groups=(("cpu", [0, 1], {"backend": "gloo"}),))
    assert eng.one(tr, "rank0/gloo:cpu", kind="isend_object")


@pytest.mark.parametrize("call", [
    lambda host: host.record_stream(host.buffer("x", MB), "nccl:ppp"),
    lambda host: host.record_stream(host.buffer("x", MB), "nccl:pp:0-2"),  # rank 2 is no peer
    lambda host: host.stream("nccl:pp:1-0"),
    lambda host: host.launch("k", stream="gloo:pp", dur=1),
    lambda host: host.record(host.event("e"), "nccl:tp"),
])
def test_a_comm_stream_name_of_no_declared_group_is_an_error_listing_the_known_ones(eng, call):
    """Typos made a new, empty stream: ``record_stream`` on it ordered nothing and the run passed
    silently. The error names the stream and lists the rank's comm streams."""
    with pytest.raises(ModelError) as err:
        eng.simulate(call, lambda host: None, groups=(PP, ("cpu", [0, 1], {"backend": "gloo"})))
    msg = str(err.value)
    assert "no comm stream of rank 0 has this name" in msg and "\n" not in msg
    assert "(its comm streams: nccl:pp, nccl:pp:0-1, gloo:cpu, gloo:cpu:to1, gloo:cpu:from1)" \
        in msg  # (a gloo group's tensor channels to and from each peer too)
    assert "host.group(NAME).comm_stream(peer)" in msg


def test_comm_stream_refuses_a_peer_outside_the_group(eng):
    with pytest.raises(ModelError, match=r"comm_stream: peer must be another rank of group 'pp' "
                       r"\(ranks \[0, 1\]\), not 0"):
        eng.simulate(lambda host: host.group("pp").comm_stream(0), None, groups=(PP,))


def test_streams_of_other_names_are_still_made_on_first_use(eng):
    def prog(host):
        assert host.stream("side").name == "side"
        host.launch("k", stream="nccl_like_but_not_comm", dur=1)

    tr = eng.simulate(prog, groups=(("pp", [0], {}),))
    assert {str(a) for a in tr.agents} >= {"rank0/side", "rank0/nccl_like_but_not_comm"}
