"""Writes through a path resolved once (:mod:`offload_fixer.resolved_paths`), on a real disk."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from offload_fixer.resolved_paths import Directory, PathChangedError, resolve, write_file


def test_a_file_is_replaced_whole_and_no_temporary_file_stays(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("old\n")
    with Directory(os.path.realpath(tmp_path)) as folder:
        folder.write_atomically("report.json", b"new\n")
    assert (tmp_path / "report.json").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_write_that_fails_midway_leaves_the_old_file_and_nothing_else(tmp_path: Path) -> None:
    """A write past the file-size limit fails as a full disk does, after the file was created."""
    (tmp_path / ".gitignore").write_text("*\n")
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        from offload_fixer.resolved_paths import Directory
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
        with Directory({os.path.realpath(tmp_path)!r}) as folder:
            try:
                folder.write_atomically(".gitignore", b"x" * 5000)
            except OSError as exc:
                sys.exit(exc.errno)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode not in (0, 1), done.stderr  # the errno of the failed write (EFBIG)
    assert (tmp_path / ".gitignore").read_text() == "*\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gitignore"]


def test_a_directory_swapped_for_a_symlink_after_it_was_resolved_is_refused(tmp_path: Path) -> None:
    (tmp_path / "proj" / "out").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    resolved = os.path.realpath(tmp_path / "proj" / "out")
    os.rename(tmp_path / "proj" / "out", tmp_path / "proj" / "out.aside")
    os.symlink(tmp_path / "outside", tmp_path / "proj" / "out")
    with pytest.raises(PathChangedError, match="proj/out"):
        Directory(resolved)
    assert list((tmp_path / "outside").iterdir()) == []


def test_a_file_swapped_for_a_symlink_is_not_opened_through_it(tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("secret\n")
    os.symlink(tmp_path / "outside.py", tmp_path / "train.py")
    with Directory(os.path.realpath(tmp_path)) as folder:
        with pytest.raises(PathChangedError, match=r"train\.py"):
            folder.open("train.py", os.O_RDONLY)
        assert folder.read("train.py") is None
    with Directory(os.path.realpath(tmp_path)) as folder:
        folder.write_atomically("train.py", b"new\n")  # the link is replaced, its target left alone
    assert (tmp_path / "outside.py").read_text() == "secret\n"
    assert not (tmp_path / "train.py").is_symlink()


def test_a_named_report_is_written_where_its_folder_leads_now(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "via")
    write_file(str(tmp_path / "via" / "report.json"), b"{}\n")
    assert (tmp_path / "real" / "report.json").read_text() == "{}\n"


def test_subdirectories_are_made_and_never_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "linked")
    with Directory(os.path.realpath(tmp_path)) as folder:
        with folder.subdirectory("state") as state:
            state.write_atomically("a.json", b"1")
        with pytest.raises(PathChangedError, match="linked"):
            folder.subdirectory("linked")
    assert (tmp_path / "state" / "a.json").read_text() == "1"
    assert list((tmp_path / "outside").iterdir()) == []


@contextmanager
def _link_removed_when_read(link: Path) -> Iterator[None]:
    """The race of a symlink swapped out while it is resolved, made to happen every time:
    ``realpath`` found ``link`` to be a symlink (``lstat``), and it is gone when ``readlink``
    reads it."""
    readlink = os.readlink

    def removed_first(path, *args, **kwargs):
        if os.path.abspath(path) == str(link) and os.path.islink(link):
            os.unlink(link)
        return readlink(path, *args, **kwargs)

    os.readlink = removed_first
    try:
        yield
    finally:
        os.readlink = readlink


# Python 3.13's realpath takes a link that vanishes as a missing path; 3.11 and 3.12 raise.
RACE_RAISES = sys.version_info < (3, 13)


def test_a_path_that_changes_while_it_is_resolved_is_a_changed_path_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "src")
    with _link_removed_when_read(tmp_path / "src"):
        if RACE_RAISES:
            with pytest.raises(PathChangedError, match=r"src.*changed while it was resolved"):
                resolve(str(tmp_path / "src" / "train.py"))
        else:
            assert resolve(str(tmp_path / "src" / "train.py")) == str(tmp_path / "src" / "train.py")


def test_a_fix_whose_path_changes_while_it_is_resolved_is_refused_with_its_name(tmp_path: Path) -> None:
    from offload_fixer.fixes.errors import OutsideScopeError
    from offload_fixer.fixes.scope import WriteScope
    from offload_fixer.fixes.writing import write_source

    project = tmp_path / "proj"
    (project / "real").mkdir(parents=True)
    (project / "real" / "train.py").write_text("x = 1\n")
    os.symlink(project / "real", project / "src")
    scope = WriteScope.of([str(project)])
    path = str(project / "src" / "train.py")
    with _link_removed_when_read(project / "src"):
        if RACE_RAISES:
            with pytest.raises(OutsideScopeError, match=r"train\.py.*changed while it was resolved.*nothing"):
                write_source(path, b"x = 1\n", b"x = 2\n", scope=scope)
    os.symlink(project / "real", project / "src")
    with _link_removed_when_read(project / "src"):
        why = scope.refusal(path)
    assert (why is not None and "changed while it was resolved" in why) or not RACE_RAISES
    assert (project / "real" / "train.py").read_text() == "x = 1\n"


def test_a_walk_names_a_link_that_changes_while_it_is_resolved(tmp_path: Path) -> None:
    from offload_fixer.source.real_paths import real_path
    from offload_fixer.static.files import Unreadable, walk

    (tmp_path / "proj").mkdir()
    (tmp_path / "elsewhere.py").write_text("x = 1\n")
    os.symlink(tmp_path / "elsewhere.py", tmp_path / "proj" / "train.py")
    with _link_removed_when_read(tmp_path / "proj" / "train.py"):
        found = list(walk([str(tmp_path / "proj")]))
    if RACE_RAISES:
        assert found == [Unreadable(str(tmp_path / "proj" / "train.py"), found[0].reason)]
        assert "changed while it was resolved" in found[0].reason
    os.symlink(tmp_path / "elsewhere.py", tmp_path / "proj" / "train.py")
    with _link_removed_when_read(tmp_path / "proj" / "train.py"):  # judged by its name meanwhile
        assert real_path(tmp_path / "proj" / "train.py") == str(tmp_path / "proj" / "train.py")
