"""Where a fix may write (:mod:`offload_fixer.fixes.scope`)."""

from __future__ import annotations

import os
from pathlib import Path

from offload_fixer.fixes.scope import WriteScope, project_root


def test_project_root_is_the_nearest_pyproject_or_git(tmp_path: Path) -> None:
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    assert project_root(str(tmp_path / "proj" / "src")) == os.path.realpath(tmp_path / "proj")


def test_only_python_inside_the_project_or_files_named(tmp_path: Path) -> None:
    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "prog.py").write_text("x = 1\n")
    (project / "link.py").symlink_to(outside / "prog.py")
    scope = WriteScope.of([str(project)], [str(outside / "named.py")])
    assert scope.refusal(str(project / "train.py")) is None
    assert scope.refusal(str(project / "nb.ipynb")) is None
    assert scope.refusal(str(outside / "named.py")) is None
    assert "outside the project" in (scope.refusal(str(project / ".." / "outside" / "prog.py")) or "")
    assert "a symlink to" in (scope.refusal(str(project / "link.py")) or "")
    assert "not a Python file" in (scope.refusal(str(project / "notes.txt")) or "")
    assert scope.refusal(str(tmp_path / "proj2" / "x.py")) is not None  # a sibling sharing the prefix


def test_a_path_that_leads_elsewhere_than_when_it_was_checked_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("x = 1\n")
    (project / "elsewhere.py").write_text("x = 1\n")
    scope = WriteScope.of([str(project)])
    assert scope.refusal("proj/src/train.py", str(project / "src" / "train.py")) is None
    refusal = scope.refusal("proj/src/train.py", str(project / "elsewhere.py"))  # inside, yet not what was checked
    assert refusal is not None and "not to" in refusal and "as when it was checked" in refusal
