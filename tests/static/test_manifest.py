"""The manifest of file facts kept by ``stat``: a second run over an unchanged tree reads no
file it vouches for, and every change a file's bytes can undergo (an edit that keeps its
size and mtime, a touch, a module added or removed, an edit in the tick the run read it)
gives the findings a run without any cache gives."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from offload_fixer.static import check_paths, manifest
from offload_fixer.static.cache import DIRECTORY, ResultCache
from offload_fixer.static.manifest import NAME, Manifest
from offload_fixer.static.text_facts import TextFacts, valid_facts

from .helpers import LEGACY
from .test_project import SHARDINGS, STEP, write

TRAIN = """\
import jax, shardings, step
f = jax.jit(step.train_step, in_shardings=(shardings.state_shardings(True), None))
"""
LATER = -60 * 10**9
"""A margin that takes every file as written a minute before the run: kept at once."""


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest, "RACY_MARGIN_NS", LATER)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the check reads, every reader of it counted."""
    from offload_fixer.source import decoding
    from offload_fixer.static import api, cache, project

    read: list[str] = []
    real = decoding.read_regular_file

    def counted(path):
        read.append(os.path.basename(path))
        return real(path)

    for module in (api, cache, project):
        monkeypatch.setattr(module, "read_regular_file", counted)
    return read


def run(root: Path, cache: bool = True, **options) -> dict[str, tuple]:
    """Each file's findings, file error and note, with the result cache (and manifest) in
    ``root`` or none."""
    results = ResultCache(root) if cache else None
    found = check_paths([str(root / "src")], jax_version=LEGACY, results=results, **options)
    return {
        Path(r.path).name: (
            sorted((d.code, d.span.line) for d in r.diagnostics),
            r.parse_error and (r.parse_error.line, r.parse_error.message),
            r.skipped,
        )
        for r in found
    }


def project(tmp_path: Path) -> Path:
    return write(tmp_path, {"src/shardings.py": SHARDINGS, "src/step.py": STEP, "src/train.py": TRAIN})


def kept(root: Path) -> dict[str, list]:
    """The manifest's entries (none where no manifest was written)."""
    found = list((root / DIRECTORY).rglob(NAME))
    return json.loads(found[0].read_text())["files"] if found else {}


def test_a_second_run_reads_no_file_the_manifest_vouches_for(tmp_path, later, reads):
    root = project(tmp_path)
    write(root, {f"src/other_{n}.py": "import numpy\n\nprint(1)\n" for n in range(5)})
    first = run(root)
    assert first == run(root, cache=False)
    assert sorted(d[0] for d in first["train.py"][0]) == ["OFL1200", "OFL1200", "OFL1201"]
    reads.clear()
    assert run(root) == first
    assert reads == []
    assert set(map(os.path.basename, kept(root))) == {"shardings.py", "step.py", "train.py"} | {
        f"other_{n}.py" for n in range(5)
    }


def test_an_edit_that_keeps_size_and_mtime_is_read(tmp_path, later, reads):
    """The ctime (which ``os.utime`` cannot set) tells the edit apart."""
    root = project(tmp_path)
    run(root)
    module = root / "src" / "shardings.py"
    status = module.stat()
    module.write_text(SHARDINGS.replace('"pinned_host"', '"device"+"xx"'))
    os.utime(module, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert module.stat().st_size == status.st_size and module.stat().st_mtime_ns == status.st_mtime_ns
    reads.clear()
    found = run(root)
    assert found == run(root, cache=False)
    assert found["train.py"][0] == []
    assert "shardings.py" in reads


def test_a_touched_file_is_read_again_and_found_the_same(tmp_path, later, reads):
    root = project(tmp_path)
    first = run(root)
    os.utime(root / "src" / "step.py")
    reads.clear()
    assert run(root) == first
    assert reads == ["step.py"]
    reads.clear()
    assert run(root) == first
    assert reads == []  # renewed by the run that read it


def test_a_module_added_where_an_import_leads_selects_its_importer(tmp_path, later):
    """``train`` spells jit but no host memory; its import of ``helpers`` finds nothing, so it is
    ruled out. Adding ``helpers.py`` with a host spelling selects it, although no file the
    manifest keeps changed."""
    root = write(
        tmp_path,
        {
            "src/train.py": """\
            import jax
            from helpers import HOST

            f = jax.jit(lambda x: x, in_shardings=HOST, out_shardings=None)
            """,
        },
    )
    assert run(root)["train.py"] == ([], None, None)
    write(root, {"src/helpers.py": SHARDINGS})
    found = run(root)
    assert found == run(root, cache=False)
    assert len(found["train.py"][0]) == 1


def test_a_removed_module_is_no_longer_read_nor_kept(tmp_path, later):
    root = project(tmp_path)
    first = run(root)
    assert first["train.py"][0]
    (root / "src" / "shardings.py").unlink()
    found = run(root)
    assert found == run(root, cache=False)
    assert found["train.py"][0] == []
    assert not any(path.endswith("shardings.py") for path in kept(root))


def test_a_file_changed_as_the_run_starts_is_never_kept(tmp_path):
    """With the real margin, a file written just now is racy: its facts are not kept, so an
    edit in the same tick of the filesystem's clock (which may leave every field of its
    ``stat`` as it was) is read by the next run."""
    root = project(tmp_path)
    cache = ResultCache(root)
    first = run(root)
    assert kept(root) == {}  # every file was written less than RACY_MARGIN_NS ago
    module = root / "src" / "shardings.py"
    keeper = cache.manifest()
    assert keeper is not None
    facts = keeper.facts(str(module), module.read_bytes)
    assert facts is not None and facts.spells("host")
    keeper.save()
    status = module.stat()
    module.write_text(SHARDINGS.replace('"pinned_host"', '"device"+"xx"'))
    os.utime(module, ns=(status.st_atime_ns, status.st_mtime_ns))
    again = Manifest(keeper.path.parent, "tool")
    assert again.facts(str(module), lambda: None) is not None
    assert run(root) == run(root, cache=False) != first


def test_a_racy_stat_is_not_kept_whatever_the_clock_says(tmp_path):
    """The guard itself: an entry is kept only for a file whose mtime and ctime are older than
    the run's start by the margin (a file whose mtime is set in the future counts as racy)."""
    module = write(tmp_path, {"a.py": "import jax\n"}) / "a.py"
    future = time.time_ns() + 3600 * 10**9
    os.utime(module, ns=(future, future))
    keeper = Manifest(tmp_path, "tool")
    facts = keeper.facts(str(module), module.read_bytes)
    assert facts is not None and not facts.spells("jit")
    keeper.save()
    assert not (tmp_path / NAME).exists() or json.loads((tmp_path / NAME).read_text())["files"] == {}


@pytest.mark.parametrize(
    "garbled", ["{not json", '{"tool": 1}', "[]", "null", '{"tool": "TOOL", "files": {"PATH": "entry"}}']
)
def test_a_garbled_manifest_is_an_empty_one(tmp_path, later, garbled):
    root = project(tmp_path)
    first = run(root)
    (path,) = (root / DIRECTORY).rglob(NAME)
    tool = json.loads(path.read_text())["tool"]
    for module in kept(root):
        path.write_text(garbled.replace('"TOOL"', json.dumps(tool)).replace("PATH", module))
        assert run(root) == first
    assert valid_facts(kept(root)[str(root / "src" / "train.py")][1])


def rewrite_manifest(root, edit) -> None:
    """The run's manifest, as ``edit`` (given its JSON, in place) leaves it."""
    (path,) = (root / DIRECTORY).rglob(NAME)
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "facts",
    [
        {"jit": "yes", "alone": 0},
        {"jit": False, "alone": False, "screen:False:None": [["one", 1, "message"]]},
        {"jit": True, "host": False, "offload": False, "imports": [[0, "shardings"]]},
        {"jit": True, "host": True, "sha256": 7},
        {"notebook": ["skipped"]},
        {"unknown": 1},
    ],
)
def test_an_entry_of_another_shape_is_no_entry(tmp_path, later, facts):
    """Facts under the file's very ``stat`` but of a shape the tool never writes are not read."""
    root = project(tmp_path)
    first = run(root)

    def facts_of_another_shape(manifest: dict) -> None:
        for entry in manifest["files"].values():
            entry[1] = facts

    rewrite_manifest(root, facts_of_another_shape)
    assert run(root) == first
    assert all(valid_facts(entry[1]) for entry in kept(root).values())


def test_a_manifest_of_another_tool_is_not_read(tmp_path, later, reads):
    root = project(tmp_path)
    first = run(root)

    def another_tools(manifest: dict) -> None:
        for entry in manifest["files"].values():
            entry[1]["host"] = entry[1]["jit"] = False  # as another offload-fixer might have found
        manifest["tool"] = "another"

    rewrite_manifest(root, another_tools)
    reads.clear()
    assert run(root) == first
    assert "train.py" in reads


def test_concurrent_runs_leave_a_whole_manifest(tmp_path, later, reads):
    root = project(tmp_path)
    for number in range(12):
        write(root, {f"src/train_{number}.py": TRAIN})
    fresh = run(root, cache=False)
    found: list[dict] = []
    threads = [threading.Thread(target=lambda: found.append(run(root))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [fresh] * 4
    assert len(kept(root)) == 15
    assert [p.name for p in (root / DIRECTORY).rglob(".manifest-*")] == []
    reads.clear()
    assert run(root) == fresh
    assert reads == []


def test_screening_verdicts_are_kept_by_the_settings_they_depend_on(tmp_path, later, reads):
    """A file ruled out is still screened: its decoding error, and a named file's syntax error,
    come from the manifest while it is unchanged, for the settings they were found with."""
    root = write(tmp_path, {"src/broken.py": "def f(:\n    pass\n", "src/ok.py": "x = 1\n"})
    (root / "src" / "latin.py").write_bytes(b"x = '\xe9'\n")
    named = {str(root / "src" / "broken.py")}
    first = run(root, check_syntax=named)
    assert first["broken.py"][1] and first["latin.py"][1] and first["ok.py"][1] is None
    assert run(root)["broken.py"][1] is None  # not named: not compiled
    reads.clear()
    assert run(root, check_syntax=named) == first
    assert run(root)["broken.py"][1] is None
    assert reads == []


def test_a_notebook_is_read_only_where_its_program_is_checked(tmp_path, later, reads):
    from tests.notebook.notebooks import HOST, IMPORTS, JIT_SITE, SCALE
    from tests.notebook.notebooks import write as write_notebook

    source = tmp_path / "src"
    source.mkdir()
    write_notebook(source / "train.ipynb", [IMPORTS, HOST, SCALE, JIT_SITE])
    write_notebook(source / "plots.ipynb", [IMPORTS, "print(1)"])
    (source / "broken.ipynb").write_text("{not json")
    julia = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"kernelspec": {"language": "julia"}}}
    (source / "julia.ipynb").write_text(json.dumps(julia))
    first = run(tmp_path)
    assert first == run(tmp_path, cache=False)
    assert first["train.ipynb"][0] and "not JSON" in first["broken.ipynb"][1][1] and first["julia.ipynb"][2]
    reads.clear()
    assert run(tmp_path) == first
    assert "plots.ipynb" not in reads and "broken.ipynb" not in reads and "julia.ipynb" not in reads
    (source / "broken.ipynb").write_text("{still not json")
    reads.clear()
    assert run(tmp_path) == first
    assert reads.count("broken.ipynb") == 1


def test_facts_of_bytes_are_those_of_the_prefilter():
    from offload_fixer.static.prefilter import checks_policy_alone, spells_host, spells_jit, spells_offload
    from offload_fixer.static.project import scan_imports

    data = TRAIN.encode() + b"x = 'pinned_host'\nfrom .a import (b,\n c)\n"
    facts = TextFacts(data)
    assert facts.spells("jit") == spells_jit(data) and facts.spells("host") == spells_host(data)
    assert facts.spells("offload") == spells_offload(data) and facts.spells("alone") == checks_policy_alone(data)
    assert facts.imports() == tuple(i for i in scan_imports(data) if i.level or i.module in ("shardings", "step"))
    assert [i.module for i in facts.imports()] == ["shardings", "step", "a"]
    assert len(facts.sha256) == 64
    assert valid_facts(facts.known) and json.loads(json.dumps(facts.known)) == facts.known
    again = TextFacts(load=lambda: None, known=json.loads(json.dumps(facts.known)))
    assert again.imports() == facts.imports() and again.sha256 == facts.sha256


def test_a_notebook_validated_in_a_worker_is_not_validated_again(tmp_path, later, monkeypatch):
    """The pool's workers validate the notebooks they analyse; the verdict comes back with the
    digest of the bytes judged and is kept, so the next run validates none of them (nbformat's
    import alone costs more than the rest of a cached run)."""
    from offload_fixer.notebook import NotebookFile
    from tests.notebook.notebooks import HOST, IMPORTS, JIT_SITE, SCALE
    from tests.notebook.notebooks import write as write_notebook

    source = tmp_path / "src"
    source.mkdir()
    for name in ("a", "b", "c"):
        write_notebook(source / f"{name}.ipynb", [IMPORTS, HOST, SCALE, JIT_SITE])
    invalid = json.loads((source / "a.ipynb").read_text())
    invalid["extra"] = 1
    (source / "c.ipynb").write_text(json.dumps(invalid))
    first = run(tmp_path, jobs=2)
    assert first == run(tmp_path, cache=False)
    assert first["a.ipynb"][0] and "not a valid notebook" in first["c.ipynb"][1][1]
    validated: list[str] = []
    real = NotebookFile.from_bytes.__func__

    def counted(cls, path, data, validate=True):
        if validate:
            validated.append(os.path.basename(path))
        return real(cls, path, data, validate)

    monkeypatch.setattr(NotebookFile, "from_bytes", classmethod(counted))
    assert run(tmp_path, jobs=2) == first
    assert validated == []


def test_a_file_changed_as_the_manifest_was_written_is_read(tmp_path, monkeypatch, reads):
    """The racy rule by the filesystem's clock: an entry is trusted only for a file last changed
    before the manifest's own mtime by the margin (here none), whatever this machine's clock
    said when the entry was kept (a file server's clock may lag it)."""
    monkeypatch.setattr(manifest, "RACY_MARGIN_NS", 0)
    root = project(tmp_path)
    time.sleep(0.05)
    first = run(root)
    reads.clear()
    assert run(root) == first
    assert reads == []
    (path,) = (root / DIRECTORY).rglob(NAME)
    changed = (root / "src" / "train.py").stat().st_ctime_ns
    os.utime(path, ns=(changed, changed))  # written, by the file system's clock, as train.py changed
    assert run(root) == first
    assert "train.py" in reads
