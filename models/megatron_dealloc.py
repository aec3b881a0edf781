"""Megatron-LM: `deallocate_output_tensor` frees a stage's output while its async p2p send still reads it.

Mirrors `megatron/core/pipeline_parallel/schedules.py` (NVIDIA/Megatron-LM): a pipeline stage's
forward output is sent to the next stage with an async `isend` (`overlap_p2p_comm=True`), and right
after the send is issued `deallocate_output_tensor(output_tensor, config.deallocate_pipeline_outputs)`
"pseudo-deallocates" it (`out.data = torch.empty((1,), ...)`: only its `.grad_fn` is kept for the
backward, and the caching allocator takes the activation's block back on the compute stream). The
`isend` copies from that block asynchronously on the NCCL stream: the allocator may hand the block
to the next microbatch's activation while NCCL is still reading it, which corrupts the activations
the next stage receives. PR #4047 ("fix: wait for async P2P send before deallocating output
tensor", merged) adds `send_next_wait_handle.wait()` before `deallocate_output_tensor` at both
places the interleaved schedule (`forward_backward_pipelining_with_interleaving`) frees an output
it sends (its warm-up overlap path and `pp_post_forward`), only when `deallocate_pipeline_outputs`
is set; it was the root cause of NaN grad norms of LLaMA 3.1 405B at PP=16, VPP=8.

Variants:

* ``racy``: `deallocate_output_tensor` right after the async send is issued (before PR #4047);
* ``fixed_4047``: the PR's fix, the send's handle waited before the output is freed (the NCCL
  `wait()` makes the compute stream wait for the send: the free is ordered after it);
* ``record_stream``: the caching allocator's own remedy, `output.record_stream(nccl stream)`
  before the free (the block goes back only once the send has run);
* ``no_dealloc``: `deallocate_pipeline_outputs=False`: the output lives until its backward, as
  autograd keeps it; no race, and every in-flight microbatch's activation stays allocated.

Simplifications: one model chunk per rank (the non-interleaved 1F1B order: warm-up forwards,
steady one-forward-one-backward, cool-down backwards; the PR's case is the interleaved schedule,
whose two free sites behave as this one), every stage's forward and backward take fixed times,
the last stage's forward includes the loss, the handles of the sends are waited at the end of the
step (the schedule waits them before it returns), no gradient reduction.
"""
from __future__ import annotations

from streamsim import Param

MiB = 1 << 20

PARAMS = [
    Param("pp", int, 4, "pipeline stages (one rank each)"),
    Param("microbatches", int, 8, "num_microbatches of one step"),
    Param("activation_mb", int, 256, "a stage's output (and its gradient) per microbatch, MiB"),
    Param("forward_us", float, 2000.0, "one stage's forward of one microbatch"),
    Param("backward_us", float, 4000.0, "one stage's backward of one microbatch"),
    Param("nccl_gb_per_s", float, 50.0, "p2p bandwidth between stages (GB/s)"),
    Param("nccl_latency_us", float, 15.0, "p2p latency"),
]

VARIANTS = {
    "racy": "deallocate_output_tensor right after the async isend is issued (before PR #4047)",
    "fixed_4047": "PR #4047: send_next_wait_handle.wait() before deallocate_output_tensor",
    "record_stream": "output.record_stream(the NCCL stream) before deallocate_output_tensor",
    "no_dealloc": "deallocate_pipeline_outputs=False: outputs live until their backward",
}

BASELINE = "racy"


def build(sim, p, variant):
    sim.group("pp", list(range(p.pp)), "nccl", latency=p.nccl_latency_us,
              bandwidth=p.nccl_gb_per_s * 1e3, p2p_streams="per_pair")
    act = p.activation_mb * MiB
    for rank in range(p.pp):
        sim.spawn(rank, lambda host, r=rank: Stage(host, r, p, variant).step())


class Stage:
    """One rank's step: `forward_backward_pipelining_without_interleaving`'s 1F1B order, with the
    async sends of `overlap_p2p_comm` (handles returned, not waited before the next op)."""

    def __init__(self, host, rank, p, variant):
        self.host, self.rank, self.p, self.variant = host, rank, p, variant
        self.act = p.activation_mb * MiB
        self.first, self.last = rank == 0, rank == p.pp - 1
        self.pp = host.group("pp")
        self.sends = []  # handles of the async sends, waited at the end of the step

    def step(self):
        p = self.p
        warmup = min(p.pp - self.rank - 1, p.microbatches)
        remaining = p.microbatches - warmup
        saved = []  # (input_tensor, output_tensor) of each forward whose backward is to come
        for mb in range(warmup):
            inp = self.p2p(mb, recv_prev=True)["recv_prev"]  # recv_forward
            out = self.forward_step(mb, inp)
            work = self.p2p(mb, send_next=out)  # send_forward
            saved.append((inp, self.deallocate(out, work.get("send_next"))))
        inp = self.p2p(warmup, recv_prev=True)["recv_prev"] if remaining else None
        for i in range(remaining):
            mb = warmup + i
            out = self.forward_step(mb, inp)
            works = self.p2p(mb, send_next=out, recv_next=True, recv_mb=i)  # send_forward_recv_backward
            saved.append((inp, self.deallocate(out, works.get("send_next"))))
            grad = self.backward_step(i, *saved.pop(0), works["recv_next"])
            last = i == remaining - 1
            got = self.p2p(i, send_prev=grad, recv_prev=not last,  # send_backward_recv_forward
                           recv_mb=mb + 1)
            inp = got["recv_prev"]
            self.free_sent(grad, got.get("send_prev"))
        for i in range(remaining, p.microbatches):
            works = self.p2p(i, recv_next=True)  # recv_backward
            grad = self.backward_step(i, *saved.pop(0), works["recv_next"])
            self.free_sent(grad, self.p2p(i, send_prev=grad).get("send_prev"))  # send_backward
        for work in self.sends:
            work.wait()

    def p2p(self, mb, send_next=None, recv_prev=False, send_prev=None, recv_next=False,
            recv_mb=None) -> dict:
        """`p2p_communication._p2p_ops`: unbatched isend/irecv (one communicator and stream per
        pair of stages), even stages sending first and odd ones receiving first, so that the two
        ends of a pair post in the same order. Returns the handles (``recv_prev``/``recv_next``:
        the received tensor, its handle waited, as `_communicate` waits receives). ``recv_mb``: the
        microbatch of what is received when it is not the one sent (1F1B pairs a forward's send
        with an older microbatch's gradient, a gradient's send with the next forward's input)."""
        host, r = self.host, self.rank
        got = mb if recv_mb is None else recv_mb
        recv_prev = recv_prev and not self.first
        recv_next = recv_next and not self.last
        send_next = None if self.last else send_next
        send_prev = None if self.first else send_prev
        order = (("send_next", "recv_prev", "send_prev", "recv_next") if r % 2 == 0 else
                 ("recv_prev", "send_next", "recv_next", "send_prev"))
        out, works = {"recv_prev": None, "recv_next": None}, {}
        for what in order:  # (the micro-batch label: what is sent, or what is received)
            host.microbatch = got if what.startswith("recv") else mb
            if what == "send_next" and send_next is not None:
                works[what] = self.pp.isend(send_next, dst=r + 1, name="send_forward")
            elif what == "send_prev" and send_prev is not None:
                works[what] = self.pp.isend(send_prev, dst=r - 1, name="send_backward")
            elif what == "recv_prev" and recv_prev:
                t = out[what] = host.buffer("input_tensor", self.act)
                works[what] = self.pp.irecv(t, src=r - 1, name="recv_forward")
            elif what == "recv_next" and recv_next:
                t = out[what] = host.buffer("output_tensor_grad", self.act)
                works[what] = self.pp.irecv(t, src=r + 1, name="recv_backward")
        for what in ("recv_prev", "recv_next"):
            if what in works:
                works[what].wait()
        self.sends += [w for k, w in works.items() if k.startswith("send")]
        return {**works, **out}

    def forward_step(self, mb, inp):
        self.host.microbatch = mb
        out = self.host.buffer("output_tensor", self.act)  # the forward's activation
        self.host.launch("forward_step", reads=[inp] if inp is not None else [], writes=[out],
                         dur=self.p.forward_us)
        return out

    def deallocate(self, out, send):
        """`deallocate_output_tensor(output_tensor, config.deallocate_pipeline_outputs)` right
        after the send is issued; returns what the backward still holds of the output."""
        if self.last or self.variant == "no_dealloc":
            return out  # (the last stage sends nothing: its output is the loss)
        if self.variant == "fixed_4047":
            send.wait()  # send_next_wait_handle.wait()
        elif self.variant == "record_stream":
            self.host.record_stream(out, self.pp.comm_stream(self.rank + 1))
        self.host.free(out)  # out.data = torch.empty((1,), ...)
        return None  # (only its grad_fn is left)

    def backward_step(self, mb, inp, out, grad):
        host = self.host
        host.microbatch = mb
        grad_in = None if self.first else host.buffer("input_tensor_grad", self.act)
        host.launch("backward_step", reads=[t for t in (inp, out, grad) if t is not None],
                    writes=[grad_in] if grad_in is not None else [], dur=self.p.backward_us)
        for t in (out, grad, inp):  # autograd lets go of them
            if t is not None:
                host.free(t)
        return grad_in

    def free_sent(self, grad, send):
        """The input gradient goes once it has been sent (the schedule waits the handle)."""
        if grad is not None:
            send.wait()
            self.host.free(grad)
