"""Tensor identity as in PyTorch (issue 27 point 1): each ``host.buffer`` is its own storage, its
name a label. Two live buffers of one name are two tensors (no false WAW, no bogus double free or
use-after-free); the same tensor is the same ``Buffer`` object; root causes group by where the
buffer was allocated, whatever it is called."""
from __future__ import annotations

import os

from streamsim import run_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEGATRON = os.path.join(ROOT, "models", "megatron_dealloc.py")

TWO_X = '''"""Two distinct tensors that a model happens to call "x"."""
VARIANTS = {"two": "two live tensors named x", "one": "one tensor, held twice"}


def build(sim, p, variant):
    def main(host):
        a = host.buffer("x", 1 << 20)
        b = host.buffer("x", 1 << 20) if variant == "two" else a
        host.launch("fill_a", writes=[a], dur=100, stream="s1")
        host.launch("fill_b", writes=[b], dur=100, stream="s2")
        host.free(a)
        if variant == "two":
            host.free(b)

    sim.spawn(0, main)
'''


def _model(tmp_path):
    path = tmp_path / "two_x.py"
    path.write_text(TWO_X)
    return str(path)


def test_two_live_buffers_of_one_name_are_two_tensors(tmp_path):
    r = run_model(_model(tmp_path), "two")
    assert not [h for h in r.findings.hazards if h.kind == "WAW"]  # distinct storages
    kinds = {n.kind for n in r.trace.notes}
    assert "double-free" not in kinds and "use-after-free" not in kinds
    # the reports tell the two apart: the second is labelled x, its storage shown as x#2
    names = [a.buffer for a in r.trace.allocations]
    assert names == ["x", "x#2"]


def test_the_same_tensor_is_the_same_buffer_object(tmp_path):
    r = run_model(_model(tmp_path), "one")
    assert [h.kind for h in r.findings.hazards] == ["WAW", "use-after-free", "use-after-free"]


def test_megatron_racy_is_one_root_cause_across_microbatches():
    r = run_model(MEGATRON, "racy")
    assert len(r.findings.hazards) == 6
    [rc] = r.findings.root_causes
    assert rc.kind == "use-after-free" and rc.buffer == "output_tensor"
    assert (rc.first.label, rc.second.label) == ("send_forward", "free(output_tensor)")
    assert rc.fix_kind == "wait_handle" and len(rc.instances) == 6


def test_equal_accesses_of_a_model_are_one_object_and_distinct_storages_are_not():
    """A model's accesses of equal value are one Access, with one View (the HB pass finds a
    view's state by its object: 130,864 objects of 53,462 values made vllm_pp's pass ~20%
    slower): a buffer allocated anew each step under one name, a slice made anew at each
    launch, a Ref made anew at each launch. Two live buffers of one name stay two storages."""
    from streamsim import Simulation

    def main(host):
        other = host.buffer("x", 64)  # (alive throughout: each step's "x" is a storage "x#2")
        for step in range(3):
            x = host.buffer("x", 64)
            host.launch("fill", writes=[x], dur=1)
            host.launch("half", reads=[x[0:32]], writes=[other], dur=1)
            host.launch("late", reads=[x.during(0.5, 1.0)], dur=1)
            host.free(x)
        host.launch("use", reads=[other], dur=1)

    sim = Simulation()
    sim.spawn(0, main)
    tr = sim.run()
    by_value: dict = {}
    for op in tr.ops:
        for acc in op.accesses:
            assert by_value.setdefault(acc, acc) is acc, (op.name, acc)
            assert by_value.setdefault(("view", acc.view), acc.view) is acc.view, (op.name, acc)
    names = {acc.view.buffer for op in tr.ops for acc in op.accesses}
    assert names == {"x", "x#2"}


def test_an_allocation_names_the_model_line_that_made_it_however_deep(tmp_path):
    """``Alloc.site`` is the model's own ``file:line`` of the ``host.buffer`` call (root causes
    group by it), called directly or from a helper of the model's, in any order with ops (the
    site is found as an op's is, from the depth it had last time, checked)."""
    from streamsim import run_model
    path = tmp_path / "sites.py"
    path.write_text('''"""Allocations at three depths."""


def make(host, name):
    return host.buffer(name, 64)  # line 5


def deeper(host, name):
    return make(host, name)


def build(sim, p, variant):
    def main(host):
        for step in range(2):
            a = host.buffer("a", 64)  # line 15
            host.launch("k", writes=[a], dur=1)
            b = make(host, "b")
            host.launch("k", writes=[b], dur=1)
            c = deeper(host, "c")
            d = host.buffer("d", 64)  # line 20
            host.free(a), host.free(b), host.free(c), host.free(d)
    sim.spawn(0, main)
''')
    r = run_model(str(path), fix_cost=False)
    sites = [(a.buffer, a.site.rsplit(":", 1)[1]) for a in r.trace.allocations]
    assert sites == [("a", "15"), ("b", "5"), ("c", "5"), ("d", "20")] * 2
    assert all(a.site.rsplit(":", 1)[0].endswith("sites.py") for a in r.trace.allocations)


def test_a_hosts_interned_views_are_bounded_as_its_cached_accesses_are(monkeypatch):
    """``Host._accesses`` interns a view only with the Access it caches for it: a tensor of a
    kind it does not cache (a subclass of View) leaves no view behind, and a cache cleared at
    its bound clears the views with it (else a model making a new view per launch would grow
    the host without bound)."""
    import dataclasses

    from streamsim import Simulation
    from streamsim.sim import host as host_module
    from streamsim.sim.memory import as_view
    from streamsim.trace import View

    monkeypatch.setattr(host_module, "_MAX_CACHED", 8)
    hosts, sizes = [], []

    def main(host):
        hosts.append(host)
        x = host.buffer("x", 4096)
        sub = type("Sub", (View,), {"__slots__": ()})
        for i in range(64):  # (one cached view throughout, a new uncached one each time)
            host.launch("cached", reads=[as_view(x[0:1])], dur=1)
            v = as_view(x[i:i + 1])
            fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
            host.launch("not cached", reads=[sub(**fields)], dur=1)
        sizes.append(len(host._views))
        for i in range(64):  # (a new cached view each time: the cache clears at its bound)
            host.launch("cached", reads=[as_view(x[i:i + 2])], dur=1)

    sim = Simulation()
    sim.spawn(0, main)
    sim.run()
    assert sizes == [1], sizes  # (the one cached view's)
    assert len(hosts[0]._views) <= 2 * (8 + 1), len(hosts[0]._views)
