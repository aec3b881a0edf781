"""The benchmarks' random stream program, written as an op log (and read back by the CSAN driver).

One rank, one host thread, ``streams`` streams, ``events`` events, ``buffers`` buffers. Each op is,
at random: an event record (1 in 14), an event wait (1 in 14: about one sync op in seven), or a
kernel on a random stream that reads one or two buffers and writes one. A kernel picks each buffer
from its own stream's share (buffer ``b`` belongs to stream ``b % streams``) except with
probability ``foreign`` (0.1), when it picks any buffer: a cross-stream access that some wait may
or may not order. At 200,000 ops this gives about 60,000 hazards in 3,000 root causes.
"""
from __future__ import annotations

import json
import random


def write_random_program(path: str, n_ops: int, *, streams: int = 8, events: int = 64,
                         buffers: int = 1000, foreign: float = 0.1, seed: int = 0) -> int:
    """Write the random program of ``n_ops`` ops to ``path`` as an op log; return ``n_ops``."""
    rnd = random.Random(seed)
    per = buffers // streams
    dumps = json.dumps

    def buffer(s: int) -> int:
        if rnd.random() < foreign:
            return rnd.randrange(buffers)
        return s + streams * rnd.randrange(per)
    with open(path, "w") as f:
        for _ in range(n_ops):
            r = rnd.random()
            s = rnd.randrange(streams)
            if r < 1 / 14:
                f.write(dumps({"op": "record", "stream": f"s{s}",
                               "event": f"e{rnd.randrange(events)}"}) + "\n")
            elif r < 2 / 14:
                f.write(dumps({"op": "wait_event", "stream": f"s{s}",
                               "event": f"e{rnd.randrange(events)}"}) + "\n")
            else:
                reads = sorted({buffer(s) for _ in range(rnd.randint(1, 2))})
                f.write(dumps({"op": "launch", "stream": f"s{s}", "name": "k",
                               "reads": [f"b{b}" for b in reads], "writes": [f"b{buffer(s)}"],
                               "dur": round(rnd.uniform(1.0, 5.0), 3)}) + "\n")
    return n_ops


def write_recorded_program(path: str, n_lines: int, *, ranks: int = 2, seed: int = 0) -> int:
    """Write an op log shaped like ``streamsim record``'s (a 2-stage pipeline: each step
    allocates an activation, host work fills it, stage 0 sends it, stage 1 receives it, the
    handle is waited, the activation freed; every line with the recorder's ``site`` and ``t``)
    of about ``n_lines`` lines to ``path``; return the lines written."""
    rnd = random.Random(seed)
    dumps = json.dumps
    clock = [0.0] * ranks
    written = 1

    def line(rank: int, obj: dict, site: str) -> str:
        clock[rank] += round(rnd.uniform(0.5, 40.0), 1)  # (t written to 0.1 us, as the recorder
        obj.update(rank=rank, t=round(clock[rank], 1),  # writes it: record/mode.py's _us; the
                   site=f"/src/pipeline.py:{site}")  # sum itself has float noise: 17 digits)
        return dumps(obj) + "\n"
    with open(path, "w") as f:
        f.write(dumps({"op": "group", "group": "world", "backend": "gloo",
                       "ranks": list(range(ranks))}) + "\n")
        step = 0
        while written < n_lines:
            act = f"act{step}@pipeline.py:63"
            for rank in range(ranks):
                peer = rank ^ 1
                out = [line(rank, {"op": "alloc", "buffer": act, "nbytes": 1 << 20}, "63 forward")]
                for name in ("fill_", "add_", "mul_"):
                    out.append(line(rank, {"op": "host", "name": name, "reads": [act],
                                           "writes": [act], "dur": round(rnd.uniform(5, 900), 1)},
                                    f"{27 + len(out)} forward"))
                kind = "isend" if rank % 2 == 0 else "irecv"
                out.append(line(rank, {"op": kind, "group": "world", "tensors": [act],
                                       "peer": peer, "nbytes": 1 << 20, "handle": f"h{step}"},
                                "39 stage"))
                out.append(line(rank, {"op": "wait", "handle": f"h{step}"}, "41 stage"))
                out.append(line(rank, {"op": "free", "buffer": act}, "44 stage"))
                f.writelines(out)
                written += len(out)
            step += 1
    return written


def write_attention_program(path: str, n_lines: int, *, seed: int = 0) -> int:
    """Write an op log shaped like a recorded attention layer of one rank (every line with the
    recorder's ``site`` and ``t``) of about ``n_lines`` lines to ``path``; return the lines
    written. Each layer of each step allocates a fused ``qkv`` activation, a kernel writes it,
    and three kernels read its query, key and value: the thirds of its last dimension, strided
    refs as the recorder writes a ``qkv.split(..., dim=-1)`` view (their bytes are not their
    hull's); the value's kernel runs on a second stream that waits an event; then ``qkv`` is
    freed with the second stream's use recorded (``record_stream``)."""
    rnd = random.Random(seed)
    dumps = json.dumps
    clock = [0.0]
    written = 0
    tokens, width, item = 256, 1024, 2  # a [tokens, 3 * width] bf16 activation

    def line(obj: dict, site: str) -> str:
        clock[0] += round(rnd.uniform(0.5, 20.0), 1)
        obj.update(t=round(clock[0], 1), site=f"/src/attention.py:{site}")
        return dumps(obj) + "\n"
    with open(path, "w") as f:
        step = 0
        while written < n_lines:
            for layer in range(8):
                qkv = f"qkv{step}_{layer}"
                out = [line({"op": "alloc", "buffer": qkv, "nbytes": tokens * 3 * width * item},
                            "40 forward"),
                       line({"op": "launch", "name": "qkv_proj", "writes": [qkv],
                             "reads": [f"w_qkv{layer}"], "dur": round(rnd.uniform(20, 60), 1)},
                            "41 forward"),
                       line({"op": "record", "event": f"qkv_ready{layer}"}, "42 forward"),
                       line({"op": "wait_event", "stream": "side", "event": f"qkv_ready{layer}"},
                            "42 forward")]
                for part, (name, stream) in enumerate((("rope_q", "compute"),
                                                       ("rope_k", "compute"),
                                                       ("v_cache_write", "side"))):
                    view = {"buffer": qkv, "offset": part * width * item,
                            "sizes": [tokens, width], "strides": [3 * width, 1],
                            "itemsize": item}
                    out.append(line({"op": "launch", "stream": stream, "name": name,
                                     "reads": [view], "writes": [f"{name}_out{layer}"],
                                     "dur": round(rnd.uniform(5, 30), 1)}, f"{44 + part} forward"))
                out.append(line({"op": "record_stream", "buffer": qkv, "stream": "side"},
                                "48 forward"))
                out.append(line({"op": "free", "buffer": qkv}, "49 forward"))
                f.writelines(out)
                written += len(out)
            step += 1
    return written


def write_threaded_program(path: str, n_lines: int, *, seed: int = 0) -> int:
    """Write an op log of one rank of two host threads (a data loader and the training loop)
    of about ``n_lines`` lines to ``path``; return the lines written. Each step the loader
    allocates a batch, fills it (host work), copies it to the device on its ``copy`` stream,
    records an event and puts the batch on a queue; the loop gets it, makes ``compute`` wait
    for the event, runs forward and backward kernels on it, syncs every 16th step, and frees
    the batch. Every line has the recorder's ``t``: the threads' line order (issueorder) and
    the hand-off are what the replay keeps between them."""
    rnd = random.Random(seed)
    dumps = json.dumps
    clock = {"loader": 0.0, "main": 0.0}
    written = 0

    def line(host: str, obj: dict) -> str:
        clock[host] += round(rnd.uniform(0.5, 20.0), 1)
        obj.update(host=host, t=clock[host])
        return dumps(obj) + "\n"
    with open(path, "w") as f:
        step = 0
        while written < n_lines:
            batch, gpu, ready = f"batch{step % 8}", f"gpu{step % 8}", f"ready{step % 8}"
            out = [line("loader", {"op": "alloc", "buffer": batch, "nbytes": 1 << 16,
                                   "stream": "copy"}),
                   line("loader", {"op": "host", "name": "fill_", "writes": [batch],
                                   "dur": round(rnd.uniform(5, 60), 1)}),
                   line("loader", {"op": "launch", "name": "copy_", "stream": "copy",
                                   "reads": [batch], "writes": [gpu], "dur": 4.0}),
                   line("loader", {"op": "record", "stream": "copy", "event": ready}),
                   line("loader", {"op": "put", "channel": "batches"}),
                   line("main", {"op": "get", "channel": "batches"}),
                   line("main", {"op": "wait_event", "stream": "compute", "event": ready}),
                   line("main", {"op": "launch", "name": "forward", "stream": "compute",
                                 "reads": [gpu, "weights"], "writes": ["act"],
                                 "dur": round(rnd.uniform(10, 80), 1)}),
                   line("main", {"op": "launch", "name": "backward", "stream": "compute",
                                 "reads": ["act", "weights"], "writes": ["grads"],
                                 "dur": round(rnd.uniform(20, 160), 1)})]
            if step % 16 == 15:
                out.append(line("main", {"op": "sync_device"}))
            out.append(line("main", {"op": "free", "buffer": batch}))
            f.writelines(out)
            written += len(out)
            step += 1
    return written
