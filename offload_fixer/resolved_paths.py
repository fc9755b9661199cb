"""Writes through a path resolved once: a symlink swapped in after the path was checked is
refused, never followed.

A write first asks where a path leads (:func:`resolve`: inside the project, into the folder
it should) and then writes there. Opening the path by name a second time would
resolve it a second time, and a directory or the file itself replaced by a symlink in
between would take the write anywhere. So a :class:`Directory` is opened at the *resolved*
path, one component at a time from the root, each with ``O_NOFOLLOW`` (``openat``): a
component that has become a symlink (or anything but a directory) since it was resolved
fails the open, and the write is refused with the path's name. Files are then opened,
created, renamed and removed through the directory's descriptor, each again without
following a symlink, so nothing reaches past the directory that was checked.

Where the system has no ``openat`` (Windows), the directory is resolved again just before
each use and compared with the resolution that was checked.
"""

from __future__ import annotations

import errno
import os
from types import TracebackType

_AT = os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd and os.mkdir in os.supports_dir_fd
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
"""``O_PATH`` where there is one: a directory the user may search but not list still opens."""
_SWAPPED = (errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", errno.ELOOP))
"""What opening a component with ``O_NOFOLLOW`` gives when it is a symlink now (FreeBSD says EMLINK)."""


class PathChangedError(OSError):
    """A path no longer leads where it did when it was checked: a component became a symlink
    or stopped being a directory. Nothing was written."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(errno.ELOOP, why, path)
        self.path = path
        self.why = why

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def resolve(path: str) -> str:
    """``os.path.realpath(path)``; a path that changes while it is resolved raises
    :class:`PathChangedError`. CPython's ``realpath`` reads a component it found to be a
    symlink a moment before (``readlink``), which fails with ENOENT or EINVAL when the link was
    removed or replaced in between: a race, not a missing file."""
    try:
        return os.path.realpath(path)
    except OSError as exc:
        raise PathChangedError(path, f"changed while it was resolved ({exc.strerror or exc})") from exc


class Directory:
    """A directory opened at its resolved path ``real`` (no symlink in it); what is written
    through it lands in that directory, whatever its path leads to by then. A context manager
    that closes its descriptor."""

    def __init__(self, real: str) -> None:
        self.real = real
        self.fd: int | None = _open_chain(real) if _AT else None
        if self.fd is None:
            self._still_here()

    def __enter__(self) -> Directory:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """``os.open`` of the entry ``name``, never following a symlink there; a symlink raises
        :class:`PathChangedError`."""
        try:
            if self.fd is not None:
                return os.open(name, flags | _NOFOLLOW, mode, dir_fd=self.fd)
            self._still_here()
            return os.open(os.path.join(self.real, name), flags | _NOFOLLOW, mode)
        except OSError as exc:
            if exc.errno in _SWAPPED:
                raise PathChangedError(os.path.join(self.real, name), "is a symlink now") from exc
            raise

    def create(self, prefix: str, mode: int = 0o600, suffix: str = "") -> tuple[int, str]:
        """A new file of a name no other has (``prefix``, random letters, ``suffix``): its
        descriptor and name."""
        for _ in range(100):
            name = f"{prefix}{os.urandom(6).hex()}{suffix}"
            try:
                return self.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), name
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free temporary name", os.path.join(self.real, prefix))

    def replace(self, source: str, destination: str) -> None:
        """Rename ``source`` over ``destination`` (a symlink there is replaced, not followed)."""
        if self.fd is not None:
            os.replace(source, destination, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            return
        self._still_here()
        os.replace(os.path.join(self.real, source), os.path.join(self.real, destination))

    def unlink(self, name: str) -> None:
        if self.fd is not None:
            os.unlink(name, dir_fd=self.fd)
        else:
            os.unlink(os.path.join(self.real, name))

    def access(self, name: str, mode: int) -> bool:
        if self.fd is not None:
            return os.access(name, mode, dir_fd=self.fd, follow_symlinks=False)
        return os.access(os.path.join(self.real, name), mode)

    def subdirectory(self, name: str) -> Directory:
        """The directory ``name`` in this one, made if missing (never through a symlink)."""
        if self.fd is not None:
            try:
                os.mkdir(name, 0o777, dir_fd=self.fd)
            except FileExistsError:
                pass
            inner = Directory.__new__(Directory)
            inner.real = os.path.join(self.real, name)
            try:
                inner.fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=self.fd)
            except OSError as exc:
                if exc.errno in _SWAPPED:
                    raise PathChangedError(inner.real, "is not a directory (a symlink?)") from exc
                raise
            return inner
        self._still_here()
        os.makedirs(os.path.join(self.real, name), exist_ok=True)
        return Directory(os.path.join(self.real, name))

    def read(self, name: str, limit: int = 1 << 20) -> bytes | None:
        """The bytes of the regular file ``name`` (at most ``limit``); None where there is none."""
        try:
            handle = self.open(name, os.O_RDONLY)
        except (FileNotFoundError, PathChangedError):
            return None
        try:
            return os.read(handle, limit)
        finally:
            os.close(handle)

    def write_atomically(self, name: str, data: bytes, mode: int = 0o666) -> None:
        """``data`` as the file ``name``, whole or not at all: written to a new file in this
        directory, flushed to disk, then renamed over ``name``. A failure (a full disk) leaves
        ``name`` as it was and no temporary file behind."""
        handle, temporary = self.create(f".{name}.", mode)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(handle, view) :]
                os.fsync(handle)
            finally:
                os.close(handle)
            self.replace(temporary, name)
        except BaseException:
            try:
                self.unlink(temporary)
            except OSError:
                pass
            raise

    def _still_here(self) -> None:
        found = resolve(self.real)
        if found != self.real:
            raise PathChangedError(self.real, f"now leads to {found}")


def write_file(path: str, data: bytes, mode: int = 0o666) -> None:
    """``data`` as the file at ``path`` (a report the user named), atomically, in the directory
    ``path``'s parent resolves to now; a component swapped for a symlink while it is written
    raises :class:`PathChangedError`."""
    directory, name = os.path.split(os.path.abspath(path))
    with Directory(resolve(directory)) as folder:
        folder.write_atomically(name, data, mode)


def _open_chain(real: str) -> int:
    """A descriptor of the directory at ``real``, opened component by component from the root
    without following a symlink."""
    if not os.path.isabs(real):
        raise ValueError(f"not an absolute path: {real}")
    drive, rest = os.path.splitdrive(real)
    fd = os.open(drive + os.sep, _DIRECTORY_FLAGS)
    reached = drive + os.sep
    try:
        for part in (p for p in rest.split(os.sep) if p):
            reached = os.path.join(reached, part)
            try:
                inner = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _SWAPPED:
                    raise PathChangedError(reached, "is not the directory it was (a symlink now?)") from exc
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd
