"""The tool's own folders in a project (``.offload-fixer-cache/``, ``.offload-fixer/``): never
followed out of the project, each file in them written whole or not at all.

A cloned repository can hold anything where the tool keeps its state, a symlink to an
outside directory included. A :class:`StateFolder` is resolved once, on first use: one that
leads out of the project (through a symlink anywhere on its path) is not used at all, and
:attr:`StateFolder.refusal` says why, for the command to say once. Otherwise its directories
are made (never through a symlink) and every write goes through the directory opened at that
resolution (:mod:`offload_fixer.resolved_paths`): a swap after it is refused, never followed.

Every file is written to a temporary file, flushed and renamed into place, so a full disk or
a killed run leaves the old file or none, never an empty or partial one. The files that sit
at the folder's top (its ``.gitignore``, which keeps git from tracking the state) are read
on first use and written again where they are missing or not what the tool writes: an empty
one left by an older version's interrupted write is repaired by the next run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from offload_fixer.resolved_paths import Directory, PathChangedError, resolve


class StateFolder:
    """``project``/``parts`` (``(".offload-fixer-cache", "1.2.0")``), with ``files`` (name ->
    text) at the top, in ``parts[0]``."""

    def __init__(self, project: str | os.PathLike[str], parts: Sequence[str], files: Mapping[str, str]) -> None:
        self.project = os.fspath(project)
        self.parts = tuple(parts)
        self.files = dict(files)
        self.refusal: str | None = None
        """Why the folder is not used (it leads out of the project, or a part of it was
        swapped for a symlink since it was resolved); None while it is, or cannot be made."""
        self._real: str | None = None
        self._broken = False

    @property
    def path(self) -> str:
        """The folder as the project names it."""
        return os.path.join(self.project, *self.parts)

    def resolve(self) -> str | None:
        """The folder's real path, made with its top files on the first call; None where it is
        not used (:attr:`refusal`) or cannot be made (a read-only checkout: no state kept)."""
        if self._real is not None or self.refusal is not None or self._broken:
            return self._real
        try:
            root = resolve(self.project)
            top = resolve(os.path.join(root, self.parts[0]))
            real = resolve(os.path.join(root, *self.parts))
        except PathChangedError as exc:
            self.refusal = f"{exc}: not used"
            return None
        for found, shown in ((top, self.parts[0]), (real, os.path.join(*self.parts))):
            if not _below(found, root):
                self.refusal = f"{os.path.join(self.project, shown)} leads out of the project (to {found}): not used"
                return None
        try:
            with Directory(root) as folder:
                with _descend(folder, _parts_below(top, root)) as at_top:
                    for name, text in self.files.items():
                        if at_top.read(name) != text.encode("utf-8"):
                            at_top.write_atomically(name, text.encode("utf-8"))
                with _descend(folder, _parts_below(real, root)):
                    pass
        except PathChangedError as exc:
            self.refusal = f"{exc}: not used"
            return None
        except OSError:
            self._broken = True
            return None
        self._real = real
        return real

    def write(self, name: str, data: bytes) -> bool:
        """``data`` as the folder's file ``name``, whole or not at all; False where it was not
        written (the folder not used, a full disk)."""
        real = self.resolve()
        if real is None:
            return False
        try:
            with Directory(real) as folder:
                folder.write_atomically(name, data)
        except PathChangedError as exc:
            self.refusal = f"{exc}: not used"
            self._real = None
            return False
        except OSError:
            return False
        return True


def _below(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _parts_below(real: str, root: str) -> list[str]:
    return [] if real == root else real[len(root.rstrip(os.sep)) + 1 :].split(os.sep)


class _descend:
    """The directory ``parts`` below ``folder``, made where missing; the directories opened on
    the way are closed, the last one on leaving the ``with`` (``folder`` itself never)."""

    def __init__(self, folder: Directory, parts: Sequence[str]) -> None:
        self.opened: list[Directory] = []
        current = folder
        try:
            for part in parts:
                current = current.subdirectory(part)
                self.opened.append(current)
        except BaseException:
            self.close()
            raise
        self.directory = current

    def __enter__(self) -> Directory:
        return self.directory

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for directory in self.opened:
            directory.close()
        self.opened = []
