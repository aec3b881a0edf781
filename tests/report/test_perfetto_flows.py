"""Perfetto flow arrows run forward in time and bind to the slices of the edge they draw."""
from __future__ import annotations

from pathlib import Path

from streamsim import run_model
from streamsim.report.perfetto import chrome_trace

def ns(us: float) -> int:
    """Perfetto keeps integer nanoseconds (and a float sum of two rounded times may not)."""
    return round(us * 1000)


VLLM = str(Path(__file__).resolve().parents[2] / "models" / "vllm_pp.py")


def test_every_flow_goes_from_its_source_slice_forward_to_its_target_slice():
    """At slice midpoints 50 of the demo's 336 arrows finished before they started. Now an
    `after` edge runs from the end of the source to the start of the target, a message edge
    from the start of the send to the end of the receive: f.ts >= s.ts for every flow, and each
    point lies within its own slice (where Perfetto binds it)."""
    report = run_model(VLLM, "regressed_49274", fix_cost=False)
    events = chrome_trace(report.trace, report.findings)["traceEvents"]
    slices = {(e["pid"], e["tid"], e["args"]["op"]): e for e in events if e["ph"] == "X"}
    by_lane: dict = {}
    for (pid, tid, _), e in slices.items():
        by_lane.setdefault((pid, tid), []).append(e)
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) > 300
    kinds = set()
    for fid, s in starts.items():
        f = ends[fid]
        assert f["ts"] >= s["ts"], (s, f)
        for point in (s, f):  # on a slice of its lane
            lane = by_lane[(point["pid"], point["tid"])]
            assert any(ns(x["ts"]) <= ns(point["ts"]) <= ns(x["ts"]) + ns(x["dur"])
                       for x in lane), point
        kinds.add(s["cat"].split(":")[0])
    assert kinds == {"after", "message"}


def test_message_flows_start_at_the_send_and_end_at_the_receive_end():
    report = run_model(VLLM, "regressed_49274", {"pp": 2}, fix_cost=False)
    t = report.trace
    events = chrome_trace(t)["traceEvents"]
    t0 = min(op.start for op in t.ops)
    recv = next(op for op in t.ops if op.kind == "irecv" and op.joins and op.end > op.start)
    send = t.op(recv.joins[0])
    starts = {e["id"]: e for e in events if e["ph"] == "s" and e["cat"] == "message"}
    ends = [e for e in events if e["ph"] == "f" and e["id"] in starts]
    pairs = [(starts[e["id"]]["ts"], e["ts"]) for e in ends]
    expected = (round(send.start - t0 + 0.001, 3), round(recv.end - t0 - 0.001, 3))
    assert expected in pairs
