"""Facts of files kept by their ``stat``, as git's index keeps hashes: a second ``check`` of an
unchanged tree decides which files to check, and whether their kept results hold, without
reading them.

One JSON file in the result cache's directory maps each file's absolute path to its
``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` and the :class:`.TextFacts` computed
from the bytes it had then (its SHA-256, the prefilter's words, its imports). A file whose
``stat`` is the same is taken to hold the same bytes: an edit changes its ctime (which
``os.utime`` cannot set back), a save by rename its inode. A file changed within the same
tick of the filesystem's clock as the run that read it could keep every field, so a file
whose mtime or ctime is not older than the run's start by :data:`RACY_MARGIN_NS` is never
kept, nor trusted one not older than the manifest's own mtime by as much (git's "racy clean"
rule, by both clocks): it is read again. The facts are those of the tool
that computed them (its fingerprint heads the file). Written to a temporary file and renamed
into place; concurrent runs each leave a whole manifest (the last one wins), and one that
cannot be read or parsed is an empty one, never an error. JSON, never pickle.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .text_facts import TextFacts, valid_facts

NAME = "manifest.json"
RACY_MARGIN_NS = 2_000_000_000
"""Files changed less than this before the run started are read again next time: more than
the coarsest timestamps of a filesystem that sets ctime (1 s; FAT's mtime, 2 s)."""


class Manifest:
    """The kept facts of one cache directory, read on first use and written by :meth:`save`
    only where this run changed them (dropping then the files that are gone)."""

    def __init__(self, directory: Path, tool: str, write: Callable[[str, bytes], object] | None = None) -> None:
        """``write(name, data)``: how the manifest is written into ``directory``, whole or not at
        all (the cache's :meth:`~offload_fixer.state_folders.StateFolder.write`; by default a
        temporary file renamed into place)."""
        self.path = directory / NAME
        self._tool = tool
        self._write = write or self._replace
        self._entries: dict[str, list] | None = None
        self._changed = False
        self._seen: set[str] = set()
        self._started = time.time_ns()

    def facts(self, path: str, load: Callable[[], bytes | None]) -> TextFacts | None:
        """The facts of the file at absolute ``path`` (kept while its ``stat`` is the same, else
        computed from ``load()`` when asked and kept for the next run); None where it is not a
        regular file, for the caller to read it as it would without a manifest."""
        try:
            status = os.stat(path)
        except OSError:
            status = None
        entries = self._read()
        self._seen.add(path)
        if status is None or not stat.S_ISREG(status.st_mode):
            self._changed |= entries.pop(path, None) is not None
            return None
        stamp = [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]
        entry = entries.get(path)
        if entry is not None and entry[0] == stamp:
            return TextFacts(load=load, known=entry[1], changed=self._note)
        if max(status.st_mtime_ns, status.st_ctime_ns) >= self._started - RACY_MARGIN_NS:
            self._changed |= entries.pop(path, None) is not None  # racy: never kept
            return TextFacts(load=load)
        entry = entries[path] = [stamp, {}]
        self._changed = True
        return TextFacts(load=load, known=entry[1], changed=self._note)

    def _note(self) -> None:
        self._changed = True

    def save(self) -> None:
        """Write the entries (whole, or not at all) when this run changed some, or computed
        facts an entry lacked."""
        if self._entries is None:
            return
        if not self._changed:
            return
        self._changed = False
        for path in [path for path in self._entries if path not in self._seen and not os.path.exists(path)]:
            del self._entries[path]  # removed since a run read it
        try:
            data = json.dumps({"tool": self._tool, "files": self._entries}, separators=(",", ":"))
        except (TypeError, ValueError):
            return
        self._write(NAME, data.encode("utf-8", "surrogateescape"))

    def _replace(self, name: str, data: bytes) -> None:
        from offload_fixer.resolved_paths import Directory, resolve

        try:
            with Directory(resolve(str(self.path.parent))) as folder:
                folder.write_atomically(name, data)
        except OSError:
            pass

    def _read(self) -> dict[str, list]:
        if self._entries is None:
            self._entries = {}
            try:
                with open(self.path, "rb") as handle:
                    written = os.fstat(handle.fileno()).st_mtime_ns  # by the clock files are stamped with
                    kept: Any = json.loads(handle.read())
                if isinstance(kept, dict) and kept.get("tool") == self._tool and isinstance(kept.get("files"), dict):
                    self._entries = {
                        path: entry
                        for path, entry in kept["files"].items()
                        if isinstance(entry, list)
                        and len(entry) == 2
                        and _settled(entry[0], written)
                        and valid_facts(entry[1])
                    }
            except (OSError, ValueError, RecursionError):
                pass
        return self._entries


def _settled(stamp: Any, written: int) -> bool:
    """Whether ``stamp`` is a ``stat`` stamp of a file last changed well before the manifest was
    written (git's racy-git rule, by the filesystem's own clock: a file server's clock behind
    this machine's cannot make a file changed as the run read it look settled)."""
    return (
        isinstance(stamp, list)
        and len(stamp) == 5
        and all(type(field) is int for field in stamp)
        and max(stamp[3], stamp[4]) < written - RACY_MARGIN_NS
    )
