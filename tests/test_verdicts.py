"""Reports kept between runs: read back whole while the module, the target and pod, the
compilers and the function's files are as they were; a miss otherwise, never an error."""

from __future__ import annotations

import threading
from pathlib import Path

import jax
import jax.numpy as jnp

from offload_fixer.analysis import analyze
from offload_fixer.model import FunctionRef
from offload_fixer.topology import parse_topology
from offload_fixer.verdicts import VerdictCache
from offload_fixer.xla.oracle import module_text

PROGRAM = """\
import jax

from offload_fixer import jax_compat


def step(x):
    return x * 2, jax.device_put(x, jax_compat.memory_move_target("pinned_host")) + 1
"""


def lowered_step(tmp_path: Path):
    """The program's ``step`` lowered for TPU, and where it is defined."""
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    namespace: dict = {}
    exec(compile(PROGRAM, str(path), "exec"), namespace)
    lowered = jax.jit(namespace["step"]).trace(jnp.ones(4)).lower(lowering_platforms=("tpu",))
    return lowered, FunctionRef("step", str(path), 6)


def test_a_kept_report_is_read_back_whole_by_the_next_run(tmp_path):
    lowered, function = lowered_step(tmp_path)
    report = analyze(lowered, target="tpu", function=function)
    first = VerdictCache(tmp_path)
    key = first.key(module_text(lowered), "tpu", None, False, function)
    assert first.get(key) is None and (first.hits, first.misses) == (0, 1)
    first.put(key, report)
    again = VerdictCache(tmp_path)
    assert again.get(key) == report and (again.hits, again.misses) == (1, 0)


def test_the_key_changes_with_what_the_report_depends_on(tmp_path):
    lowered, function = lowered_step(tmp_path)
    cache = VerdictCache(tmp_path)
    text = module_text(lowered)
    key = cache.key(text, "tpu", None, False, function)
    assert key == VerdictCache(tmp_path).key(text, "tpu", None, False, function)
    others = {
        "another module": cache.key(text.replace("2.000000e+00", "3.000000e+00"), "tpu", None, False, function),
        "another target": cache.key(text, "gpu", None, False, function),
        "a pod": cache.key(text, "tpu", parse_topology("v5e-256"), False, function),
        "two slices of it": cache.key(text, "tpu", parse_topology("v5e-256", 2), False, function),
        "the compiler asked": cache.key(text, "tpu", None, True, function),
        "another function": cache.key(text, "tpu", None, False, FunctionRef("other", function.path, 6)),
    }
    assert len({key, *others.values()}) == len(others) + 1
    # the same layout named another way is the same pod
    assert others["a pod"] == cache.key(text, "tpu", parse_topology("v5e:16x16"), False, function)
    Path(function.path or "").write_text(PROGRAM + "# edited where no line moves\n")
    assert cache.key(text, "tpu", None, False, function) != key  # a fix would write that file


def test_an_entry_that_cannot_be_read_is_a_miss(tmp_path):
    lowered, function = lowered_step(tmp_path)
    cache = VerdictCache(tmp_path)
    key = cache.key(module_text(lowered), "tpu", None, False, function)
    cache.put(key, analyze(lowered, target="tpu", function=function))
    (entry,) = Path(cache.folder.folder.path).glob("verdict-*.json")
    for broken in (b"", b"{not json", b'{"key": "other", "report": {}}', b'{"key": "%s", "report": 3}' % key.encode()):
        entry.write_bytes(broken)
        assert VerdictCache(tmp_path).get(key) is None


def test_concurrent_writers_leave_whole_entries(tmp_path):
    """Runs writing the same verdict while others read it: every read is the whole report
    or nothing, and no temporary file is left behind."""
    lowered, function = lowered_step(tmp_path)
    report = analyze(lowered, target="tpu", function=function)
    key = VerdictCache(tmp_path).key(module_text(lowered), "tpu", None, False, function)
    read: list = []

    def write() -> None:
        for _ in range(20):
            VerdictCache(tmp_path).put(key, report)

    def look() -> None:
        for _ in range(40):
            read.append(VerdictCache(tmp_path).get(key))

    threads = [threading.Thread(target=work) for work in (write, write, look, look)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(found is None or found == report for found in read)
    assert VerdictCache(tmp_path).get(key) == report
    assert [p.name for p in Path(VerdictCache(tmp_path).folder.folder.path).iterdir() if p.name.startswith(".")] == []
