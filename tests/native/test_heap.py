"""The command's heap policy (streamsim/native/_heap.pyx): memory the process frees is kept and
reused, so that memory made, freed and made again (a default ``check``'s runs, one per fix it
costs) is faulted in once, not once per run; and only the command line's own process keeps it.

Each case runs in a fresh interpreter (the policy is for the life of a process) and counts the
page faults (``ru_minflt``) of the second of two equal rounds of allocation: Python objects
(pymalloc's arenas) and blocks of 4 MB (glibc's heap). Without the policy the second round
faults in as much as the first, which shows the count sees what it measures.

Skipped where ``_heap`` was not built; under CI a missing module fails instead.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from .built import required

pytestmark = required("_heap", "the heap policy")

ROUNDS = textwrap.dedent("""
    import resource, sys
    from streamsim.native import _heap
    if sys.argv[1] == "keep":
        _heap.keep_freed_memory()

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def objects():  # ~60 MB of small objects: pymalloc's arenas
        made = [(i, float(i), str(i)) for i in range(400_000)]
        del made

    def blocks():  # 64 MB in blocks of 4 MB, each page written (bytearray zeroes it): glibc
        made = [bytearray(4 << 20) for _ in range(16)]
        del made

    out = []
    for churn in (objects, blocks):
        a = faults(); churn(); b = faults(); churn(); c = faults()
        out += [b - a, c - b]
    print(*out)
""")


def rounds(mode: str) -> tuple[int, int, int, int]:
    """Page faults of (objects' first round, second round, blocks' first, second)."""
    got = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONMALLOC": "pymalloc"})
    assert got.returncode == 0, got.stderr
    first_o, second_o, first_b, second_b = map(int, got.stdout.split())
    return first_o, second_o, first_b, second_b


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap, Linux's counts")
def test_memory_freed_and_made_again_is_not_faulted_in_again():
    first_o, second_o, first_b, second_b = rounds("system")
    # (the count sees the memory: 60 MB of objects and 64 MB of blocks are thousands of pages)
    assert first_o > 5000 and second_o > first_o // 2, (first_o, second_o)
    assert first_b > 10000 and second_b > first_b // 2, (first_b, second_b)
    system_b = first_b
    first_o, second_o, first_b, second_b = rounds("keep")
    assert first_o > 5000 and second_o < first_o // 10, (first_o, second_o)
    # (the blocks' first round takes the objects' freed memory too: the test below)
    assert second_b < system_b // 10, (first_b, second_b, system_b)


CROSS = textwrap.dedent("""
    import resource, sys
    from streamsim.native import _heap
    if sys.argv[1] == "keep":
        _heap.keep_freed_memory()

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    made = [(i, float(i), str(i)) for i in range(400_000)]  # ~60 MB of objects: arenas
    del made
    a = faults()
    blocks = [bytearray(4 << 20) for _ in range(12)]  # then 48 MB of C blocks
    b = faults()
    del blocks
    made = [(i, float(i), str(i)) for i in range(400_000)]  # and objects again
    c = faults()
    print(b - a, c - b)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap, Linux's counts")
def test_memory_objects_free_is_reused_by_blocks_and_back():
    """One heap for pymalloc's arenas and C blocks: the blocks made after objects were freed
    (a stage's arrays after the log's lines) take the objects' memory rather than fresh pages,
    and objects made after the blocks were freed take theirs. (Freed arenas kept in a list of
    their own, as before the fifteenth session, could serve arenas alone: a 1,000,000-line
    check's peak RSS was 1,484 MB with the policy, 1,101 MB without.)"""
    def cross(mode):
        got = subprocess.run([sys.executable, "-c", CROSS, mode], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "PYTHONMALLOC": "pymalloc"})
        assert got.returncode == 0, got.stderr
        return tuple(map(int, got.stdout.split()))
    blocks, objects = cross("system")
    assert blocks > 8000 and objects > 8000, (blocks, objects)  # (the count sees the memory)
    kept_blocks, kept_objects = cross("keep")
    assert kept_blocks < blocks // 10 and kept_objects < objects // 4, \
        (kept_blocks, blocks, kept_objects, objects)


MAPPED = textwrap.dedent("""
    import resource, sys
    from streamsim.native import _heap
    _heap.keep_freed_memory()

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def blocks():  # 48 MB in blocks of 4 MB, each page written
        made = [bytearray(4 << 20) for _ in range(12)]
        del made

    took = _heap.map_large_blocks(True)
    a = faults(); blocks(); b = faults(); blocks(); c = faults()
    back = _heap.map_large_blocks(False)
    blocks(); d = faults(); blocks(); e = faults()
    print(int(took), int(back), b - a, c - b, e - d)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap, Linux's counts")
def test_large_blocks_made_while_mapped_are_handed_back_when_freed():
    """``map_large_blocks(True)`` (the first analysis's HB pass, ``native.hb_hazards``): blocks of
    1.5 MiB and more are mapped on their own, so freed they go back to the system and made again
    they are faulted in again (the heap does not keep them: it would hold their memory to the
    end of the command, beside what the analysis makes next). Off again, the heap keeps blocks
    as before: made a second time, they are not faulted in."""
    got = subprocess.run([sys.executable, "-c", MAPPED], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONMALLOC": "pymalloc"})
    assert got.returncode == 0, got.stderr
    took, back, first, second, kept = map(int, got.stdout.split())
    assert took == 1 and back == 1
    assert first > 8000 and second > first // 2, (first, second)  # (mapped: fresh each time)
    assert kept < first // 10, (kept, first)  # (kept by the heap once off)


RUN_CHECK = textwrap.dedent("""
    import sys
    from streamsim.cli.main import main
    from streamsim.native import _heap
    code = main(["check", sys.argv[1]], supervise=sys.argv[2] == "program")
    print(code, _heap.kept()[0])
""")


@pytest.mark.parametrize("as_program, native_env, kept", [
    (True, "1", True),  # `streamsim check`: its process exits when the command is done
    (False, "1", False),  # main(argv) from a script or test: a library caller keeps its memory
    (True, "0", False),  # STREAMSIM_NATIVE=0: the compiled core off, the policy with it
])
def test_only_the_command_lines_own_process_keeps_freed_memory(tmp_path, as_program, native_env,
                                                                 kept):
    log = tmp_path / "one.jsonl"
    log.write_text('{"op": "launch", "stream": "s1", "name": "k", "writes": ["a"]}\n')
    env = {**os.environ, "STREAMSIM_NATIVE": native_env, "STREAMSIM_SUPERVISE": "0"}  # (the
    # command in this process, where its policy can be read)
    got = subprocess.run([sys.executable, "-c", RUN_CHECK, str(log),
                          "program" if as_program else "library"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split()[-2:] == ["0", str(kept)]


def test_a_check_maps_the_large_blocks_of_its_run_not_of_its_fix_reruns(monkeypatch, tmp_path):
    """The run's own replay and its HB pass map their large blocks while they run
    (``native.large_blocks_mapped``: arrays freed as each ends go back to the system instead of
    staying as holes in the kept heap, which lowered a check's peak); fix costing's re-runs
    keep the heap, which would fault those pages in again each time. (The policy's switch is
    replaced here by a recorder: a test's process has no policy installed.) Where the compiled
    stages do not run, nothing is mapped."""
    from streamsim import native
    from streamsim.native import _heap
    from streamsim.pipeline import check_oplog
    mapping = [False]
    switched = []

    def switch(on: bool) -> bool:
        mapping[0] = on
        switched.append(on)
        return True

    monkeypatch.setattr(_heap, "map_large_blocks", switch)
    seen = []  # (stage, mapped while it ran)
    replayer = native.replayer()
    if replayer is not None:
        replay = replayer.replay
        monkeypatch.setattr(replayer, "replay",
                            lambda *a, **k: seen.append(("replay", mapping[0])) or replay(*a, **k))
        hb = native._compiled.hb_columns
        monkeypatch.setattr(native._compiled, "hb_columns",
                            lambda *a: seen.append(("hb", mapping[0])) or hb(*a))
    log = tmp_path / "war.jsonl"
    log.write_text('{"op":"launch","stream":"side","name":"r","reads":["x"]}\n'
                   '{"op":"launch","name":"w","writes":["x"]}\n')
    report = check_oplog(str(log), fix_cost=True, jobs=1)
    assert report.findings.hazards
    if replayer is None:
        assert switched == [] and seen == []
        return
    assert seen[:2] == [("replay", True), ("hb", True)], seen
    reruns = [mapped for stage, mapped in seen[2:] if stage == "replay"]
    assert reruns and not any(reruns), seen
    assert mapping[0] is False  # (switched back after each)
