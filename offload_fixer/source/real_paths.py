"""Real paths (symlinks followed) for one pass over a tree that does not change under it, and
the parts of one below another."""

from __future__ import annotations

import os
from pathlib import Path

from offload_fixer.resolved_paths import PathChangedError, resolve


class ListedPath(str):
    """A path found by listing its directory, with what the listing told of it: whether it is
    a symlink, and (not following one) a directory. :class:`RealPaths` and the settings of a
    path need not ask the disk again."""

    is_symlink: bool
    is_directory: bool

    def __new__(cls, path: str, is_symlink: bool, is_directory: bool) -> ListedPath:
        listed = super().__new__(cls, path)
        listed.is_symlink = is_symlink
        listed.is_directory = is_directory
        return listed

    def __reduce__(self) -> tuple:
        return ListedPath, (str(self), self.is_symlink, self.is_directory)


def is_directory(path: str) -> bool:
    """``os.path.isdir``, answered by the listing that found ``path`` where it is no symlink."""
    if isinstance(path, ListedPath) and not path.is_symlink:
        return path.is_directory
    return os.path.isdir(path)


def real_path(path: str | os.PathLike[str]) -> str:
    """``os.path.realpath``, for judging a path (excluded? seen already?). A path that changes
    while it is resolved (a symlink swapped in and out) is judged by its absolute name: a write
    resolves it again, and refuses it if it changed (:mod:`offload_fixer.resolved_paths`)."""
    try:
        return resolve(os.fspath(path))
    except PathChangedError:
        return os.path.abspath(path)


class RealPaths:
    """``os.path.realpath`` for one pass over a tree that is taken not to change under it (a run
    of ``check``): a path whose last part is no symlink is its directory's real path (resolved
    once, then remembered) joined with its name, so a tree of thousands of files costs one
    ``lstat`` per file and one resolution per directory, not one ``lstat`` per part of every
    path. A symlinked file, and a path ending in ``.``/``..``, are resolved whole."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def __call__(self, path: str | os.PathLike[str]) -> str:
        path = os.fspath(path)
        found = self._known.get(path)
        if found is None:
            head, name = os.path.split(path)
            link = path.is_symlink if isinstance(path, ListedPath) else os.path.islink(path)
            if not name or name in (os.curdir, os.pardir) or link:
                found = real_path(path)
            else:
                found = os.path.join(self(head), name)
            self._known[path] = found
        return found


def relative_parts(absolute: str, root: str) -> tuple[str, ...]:
    """The parts of ``absolute`` below ``root`` (both real paths), as
    ``Path(absolute).relative_to(root).parts`` gives them; all its parts where it is not below."""
    if os.altsep is None and _plain(absolute) and _plain(root):  # POSIX paths: pathlib's parts, by string
        if root == absolute:
            return ()
        prefix = root if root == os.sep else root + os.sep
        if absolute.startswith(prefix):
            return tuple(absolute[len(prefix) :].split(os.sep))
        return (os.sep, *absolute[1:].split(os.sep)) if absolute != os.sep else (os.sep,)
    try:  # elsewhere (``//`` roots, Windows drives): pathlib's reading
        return Path(absolute).relative_to(root).parts
    except ValueError:
        return Path(absolute).parts


def _plain(path: str) -> bool:
    """An absolute, normalised path with a one-``/`` root, as ``realpath`` gives on POSIX."""
    return path.startswith(os.sep) and not path.startswith(os.sep * 2)
