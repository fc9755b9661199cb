"""Results kept between runs: read only while the file, the modules it read and the directories
its imports were looked up in are as they were; written whole or not at all."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from offload_fixer.static import check_paths
from offload_fixer.static.cache import DIRECTORY, ResultCache
from tests.cli_support import offload_fixer

from .helpers import LEGACY
from .test_project import SHARDINGS, STEP, write

TRAIN = """\
import jax, shardings, step
f = jax.jit(step.train_step, in_shardings=(shardings.state_shardings(True), None))
"""


def checked(root: Path, cache: ResultCache) -> dict[str, list]:
    results = check_paths([str(root / "src")], jax_version=LEGACY, results=cache)
    return {Path(r.path).name: [d.to_dict() for d in r.diagnostics] for r in results}


def project(tmp_path: Path) -> Path:
    return write(tmp_path, {"src/shardings.py": SHARDINGS, "src/step.py": STEP, "src/train.py": TRAIN})


def test_a_second_run_reads_what_the_first_found(tmp_path):
    root = project(tmp_path)
    first = checked(root, ResultCache(root))
    assert sorted(d["code"] for d in first["train.py"]) == ["OFL1200", "OFL1200", "OFL1201"]
    again = ResultCache(root)
    assert checked(root, again) == first
    # train.py, which jits, and shardings.py, which spells a host memory kind (its code outside
    # any jit is checked too): the files the prefilter let through
    assert (again.hits, again.misses) == (2, 0)
    assert checked(root, ResultCache(tmp_path / "elsewhere")) == first  # another cache: computed again


def test_an_edit_of_the_file_is_checked_anew(tmp_path):
    root = project(tmp_path)
    checked(root, ResultCache(root))
    (root / "src" / "train.py").write_text(TRAIN.replace("(True)", "(False)"))
    cache = ResultCache(root)
    assert checked(root, cache)["train.py"] == []
    assert cache.misses == 1


def test_an_edit_of_a_module_it_imports_is_checked_anew(tmp_path):
    root = project(tmp_path)
    checked(root, ResultCache(root))
    (root / "src" / "shardings.py").write_text(SHARDINGS.replace('"pinned_host"', '"device"'))
    assert checked(root, ResultCache(root))["train.py"] == []


def test_a_module_added_where_an_import_now_leads_is_checked_anew(tmp_path):
    """``train`` imports ``helpers``, which no file defines: unknown, so silent. Adding
    ``helpers.py`` changes what the import finds although no file the check read changed."""
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
    assert checked(root, ResultCache(root))["train.py"] == []
    (root / "src" / "helpers.py").write_text(SHARDINGS)
    cache = ResultCache(root)
    assert len(checked(root, cache)["train.py"]) == 1
    assert cache.misses >= 1


def test_a_broken_entry_is_a_miss(tmp_path):
    root = project(tmp_path)
    first = checked(root, ResultCache(root))
    for entry in (root / DIRECTORY).rglob("*.json"):
        entry.write_text(entry.read_text()[:20])
    cache = ResultCache(root)
    assert checked(root, cache) == first
    assert cache.hits == 0


def test_an_entry_of_other_settings_or_another_tool_is_never_read(tmp_path):
    root = project(tmp_path)
    checked(root, ResultCache(root))
    gpu = list(check_paths([str(root / "src")], target="gpu", jax_version=LEGACY, results=ResultCache(root)))
    assert all(d.target == "gpu" for r in gpu for d in r.diagnostics)
    entries = list((root / DIRECTORY).rglob("*.json"))
    for entry in entries:  # as an older offload-fixer would have keyed them
        kept = json.loads(entry.read_text())
        kept["key"] = "0" * 64
        entry.write_text(json.dumps(kept))
    cache = ResultCache(root)
    checked(root, cache)
    assert cache.hits == 0


def test_a_cache_that_cannot_be_written_is_no_cache(tmp_path):
    root = project(tmp_path)
    (root / DIRECTORY).write_text("a file where the directory would be\n")
    assert len(checked(root, ResultCache(root))["train.py"]) == 3
    assert len(checked(root, ResultCache(root))["train.py"]) == 3
    assert (root / DIRECTORY).read_text() == "a file where the directory would be\n"


def test_the_command_keeps_its_cache_in_the_project_and_prints_the_same_report(tmp_path):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text('[tool.offload-fixer]\njax-version = "0.4.26"\n')
    work = root / "src"
    cold = offload_fixer("check", "--no-cache", ".", cwd=work)
    assert cold.returncode == 1 and not (root / DIRECTORY).exists()  # --no-cache writes nothing
    first = offload_fixer("check", "-v", ".", cwd=work)
    second = offload_fixer("check", "-v", ".", cwd=work)
    assert first.stdout == second.stdout
    assert offload_fixer("check", ".", cwd=work).stdout == cold.stdout
    assert "3 files: 2 analysed, 1 ruled out by the prefilter" in first.stderr
    assert "3 files: 2 analysed (2 read from the cache), 1 ruled out" in second.stderr
    top = root / DIRECTORY
    assert (top / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (top / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_concurrent_runs_leave_whole_entries(tmp_path):
    """Four checks at once, as pre-commit's parallel batches run: each reads a whole entry or
    none, and the cache they leave answers a fifth run with the same report."""
    root = project(tmp_path)
    for number in range(12):
        write(root, {f"src/train_{number}.py": TRAIN})
    from tests.cli_support import command, environment

    runs = [
        subprocess.Popen(
            [*command(), "check", "--jax-version", LEGACY, "."],
            cwd=root / "src",
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert len({out for out, _ in outputs}) == 1 and all(run.returncode == 1 for run in runs)
    leftovers = [p.name for p in (root / DIRECTORY).rglob("*") if p.name.startswith(".entry-")]
    assert leftovers == []
    assert offload_fixer("check", "--jax-version", LEGACY, ".", cwd=root / "src").stdout == outputs[0][0]
    counted = offload_fixer("check", "-v", "--jax-version", LEGACY, ".", cwd=root / "src").stderr
    assert "14 analysed (14 read from the cache)" in counted


def test_a_module_resolved_for_an_earlier_file_of_the_run_is_still_a_dependency(tmp_path):
    """``a`` and ``b`` read ``fast`` from ``helpers``, which takes it from ``deeper``. The run
    resolves it once, for ``a``; ``b``'s entry must still depend on ``deeper``, which only
    that resolution read (``b`` holds no statement a jit can reach, so nothing else reads it)."""
    from .helpers import HEADER, PROPAGATION

    main = (
        HEADER
        + "from helpers import fast\n\n\n@fast\ndef step(params, x):\n"
        + "    moved = jax.device_put(params, host)\n    return x, {'mu': moved * 2}\n"
        + "\n\nidentity = jax.jit(lambda x: x)\n"
    )
    root = write(
        tmp_path,
        {
            "src/deeper.py": "import functools\n\nfast = functools.partial(print)\n",
            "src/helpers.py": "from deeper import fast\n",
            "src/a.py": main,
            "src/b.py": main,
        },
    )

    def run(cache: ResultCache | None) -> dict[str, list[str]]:
        results = check_paths([str(root / "src")], jax_version=PROPAGATION, results=cache)
        return {Path(r.path).name: sorted(d.code for d in r.diagnostics) for r in results}

    assert run(ResultCache(root))["b.py"] == []
    (root / "src" / "deeper.py").write_text("import functools\nimport jax\n\nfast = functools.partial(jax.jit)\n")
    fresh = run(None)
    assert "OFL1200" in fresh["b.py"]
    assert run(ResultCache(root)) == fresh


def test_a_notebook_is_read_again_only_when_its_bytes_change(tmp_path, monkeypatch):
    """A notebook's program is kept by the notebook's bytes: a second run neither decodes its
    JSON nor masks its cells, and neither validates again the one the check analyses (its
    verdict is kept too); an edit, of a cell or an output alone, reads it anew."""
    from offload_fixer.notebook import NotebookFile
    from tests.notebook.notebooks import HOST, IMPORTS, JIT_SITE, SCALE, TYPED
    from tests.notebook.notebooks import write as write_notebook

    root = tmp_path / "src"
    root.mkdir()
    train = write_notebook(root / "train.ipynb", [IMPORTS, HOST, SCALE, JIT_SITE])
    write_notebook(root / "plots.ipynb", [IMPORTS, "print(1)"])
    julia = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"kernelspec": {"language": "julia"}}}
    (root / "julia.ipynb").write_text(json.dumps(julia))
    (root / "broken.ipynb").write_text("{not json")
    invalid = json.loads(train.read_text())
    invalid["extra"] = 1  # nbformat's schema refuses it; the check analyses it
    (root / "invalid.ipynb").write_text(json.dumps(invalid))
    reads: list[tuple[str, bool]] = []
    real = NotebookFile.from_bytes.__func__

    def counted(cls, path, data, validate=True):
        reads.append((Path(path).name, validate))
        return real(cls, path, data, validate)

    monkeypatch.setattr(NotebookFile, "from_bytes", classmethod(counted))

    def run() -> dict[str, tuple]:
        found = check_paths([str(root)], jax_version=TYPED, results=ResultCache(tmp_path))
        return {
            Path(r.path).name: ([d.code for d in r.diagnostics], r.parse_error and r.parse_error.message, r.skipped)
            for r in found
        }

    first = run()
    assert "OFL1200" in first["train.ipynb"][0]
    assert "not a valid notebook" in first["invalid.ipynb"][1] and "not JSON" in first["broken.ipynb"][1]
    assert "julia" in first["julia.ipynb"][2] and first["plots.ipynb"] == ([], None, None)
    assert ("train.ipynb", True) in reads and ("plots.ipynb", True) not in reads
    reads.clear()
    assert run() == first
    assert reads == []  # every notebook (and every verdict) read from the cache
    entries = sorted((tmp_path / DIRECTORY).rglob("*.json"))
    edited = json.loads(train.read_text())
    edited["cells"][0]["outputs"] = []
    train.write_text(json.dumps(edited))
    assert run() == first
    assert sorted(reads) == [("train.ipynb", False), ("train.ipynb", True)]
    assert sorted((tmp_path / DIRECTORY).rglob("*.json")) == entries  # one entry per notebook, replaced
    reads.clear()
    train.write_text(train.read_text().replace("pinned_host", "device"))
    assert run()["train.ipynb"] == ([], None, None)
    assert reads == [("train.ipynb", False)]  # no longer analysed: not validated
