"""The tool's state folders (:mod:`offload_fixer.state_folders`) in a hostile checkout."""

from __future__ import annotations

import os
from pathlib import Path

from offload_fixer.state_folders import StateFolder

GITIGNORE = {".gitignore": "# state\n*\n"}


def _project(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "proj").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path / "proj", tmp_path / "outside"


def test_a_folder_that_is_a_symlink_out_of_the_project_is_not_used(tmp_path: Path) -> None:
    project, outside = _project(tmp_path)
    os.symlink(outside, project / ".state")
    folder = StateFolder(project, (".state",), GITIGNORE)
    assert folder.write("last-run.json", b"{}") is False
    assert folder.refusal is not None and "leads out of the project" in folder.refusal
    assert str(outside) in folder.refusal
    assert list(outside.iterdir()) == []


def test_a_folder_below_it_that_leads_out_is_not_used_either(tmp_path: Path) -> None:
    project, outside = _project(tmp_path)
    (project / ".cache").mkdir()
    os.symlink(outside, project / ".cache" / "1.0")
    folder = StateFolder(project, (".cache", "1.0"), GITIGNORE)
    assert folder.write("entry.json", b"{}") is False
    assert folder.refusal is not None and ".cache/1.0" in folder.refusal
    assert list(outside.iterdir()) == []


def test_a_symlink_to_a_folder_inside_the_project_is_followed(tmp_path: Path) -> None:
    project, _ = _project(tmp_path)
    (project / "build" / "state").mkdir(parents=True)
    os.symlink(project / "build" / "state", project / ".state")
    folder = StateFolder(project, (".state",), GITIGNORE)
    assert folder.write("last-run.json", b"{}")
    assert folder.refusal is None
    assert sorted(p.name for p in (project / "build" / "state").iterdir()) == [".gitignore", "last-run.json"]


def test_an_empty_or_partial_gitignore_is_repaired_and_a_whole_one_left_alone(tmp_path: Path) -> None:
    project, _ = _project(tmp_path)
    (project / ".state").mkdir()
    for found in ("", "# sta"):
        (project / ".state" / ".gitignore").write_text(found)
        assert StateFolder(project, (".state",), GITIGNORE).write("x.json", b"1")
        assert (project / ".state" / ".gitignore").read_text() == "# state\n*\n"
    before = (project / ".state" / ".gitignore").stat().st_mtime_ns
    assert StateFolder(project, (".state",), GITIGNORE).write("x.json", b"2")
    assert (project / ".state" / ".gitignore").stat().st_mtime_ns == before


def test_a_read_only_checkout_keeps_no_state_and_says_nothing(tmp_path: Path) -> None:
    project, _ = _project(tmp_path)
    project.chmod(0o555)
    try:
        folder = StateFolder(project, (".state",), GITIGNORE)
        if os.access(project, os.W_OK):  # root writes anywhere: nothing to show
            return
        assert folder.write("x.json", b"1") is False
        assert folder.refusal is None
    finally:
        project.chmod(0o755)
