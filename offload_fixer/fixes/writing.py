"""Writing a fixed file: atomically where the file allows it, keeping its owner, mode, extended
attributes and hard links, and only if it still holds the bytes that were analysed."""

from __future__ import annotations

import errno
import os
import stat
import tempfile

from offload_fixer.fixes.errors import ReadOnlySourceError, SourceChangedError, SourceReadError
from offload_fixer.interrupts import uninterrupted


def write_source(path: str, expected: bytes, data: bytes) -> None:
    """Replace the content of the file (a symlink's target) with ``data``, keeping the file:
    its mode, owner, group, extended attributes (ACLs) and hard links.

    Normally by a temporary file in the same directory, given the original's metadata, then
    renamed over it: a reader or an interrupted run sees the old bytes or the new ones, never
    a mix. Where a rename cannot keep the file — it has other hard links (they would keep the
    old content), or its owner, group or attributes cannot be given to a new file, or its
    directory is not writable — the bytes are written into the file itself instead, after
    the same checks (see ``README.md``, "Writing"). A file without write permission is
    refused even where the rename would succeed (as root): read-only is the user's choice.
    """
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError as exc:
        raise SourceReadError(path, f"cannot stat: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise SourceReadError(path, "is not a regular file; nothing was written")
    if not info.st_mode & stat.S_IWUSR or not os.access(real, os.W_OK):
        raise ReadOnlySourceError(path, "is read-only; nothing was written")
    if _file_bytes(real) != expected:
        raise SourceChangedError(path, "changed while it was being fixed; nothing was written")
    try:
        if info.st_nlink > 1 or not _replace_keeping_metadata(real, info, data):
            with uninterrupted():
                _write_in_place(real, data)
    except OSError as exc:
        raise ReadOnlySourceError(path, f"cannot be written ({exc.strerror or exc}); nothing was written") from exc


def _replace_keeping_metadata(real: str, info: os.stat_result, data: bytes) -> bool:
    """Write ``data`` to a temporary file with ``info``'s owner, group, mode and extended
    attributes and rename it over ``real``; False (nothing changed) where one of them cannot
    be given to the new file or no file can be created next to it."""
    directory, name = os.path.split(real)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".offload-fixer", dir=directory)
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as stream:
            descriptor = stream.fileno()
            if not _copy_metadata(real, descriptor, info):
                os.unlink(temporary)
                return False
            stream.write(data)
            stream.flush()
            os.fsync(descriptor)
        os.replace(temporary, real)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return True


def _copy_metadata(real: str, descriptor: int, info: os.stat_result) -> bool:
    """Give the new file the original's owner, group, mode and extended attributes (ACLs,
    security labels); False where the system does not let this process do so."""
    created = os.fstat(descriptor)
    try:
        if (created.st_uid, created.st_gid) != (info.st_uid, info.st_gid):
            os.fchown(descriptor, info.st_uid, info.st_gid)
        os.fchmod(descriptor, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits
        wanted, present = _xattrs(real), _xattrs(descriptor)
        for attribute in present.keys() - wanted.keys():  # e.g. a default ACL the directory gave it
            os.removexattr(descriptor, attribute)
        for attribute, value in wanted.items():
            if present.get(attribute) != value:
                os.setxattr(descriptor, attribute, value)
    except PermissionError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):  # a filesystem without xattrs
            return False
        raise
    return stat.S_IMODE(os.fstat(descriptor).st_mode) == stat.S_IMODE(info.st_mode)


def _xattrs(file: str | int) -> dict[str, bytes]:
    if not hasattr(os, "listxattr"):
        return {}
    try:
        return {name: os.getxattr(file, name) for name in os.listxattr(file)}
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise


def _write_in_place(real: str, data: bytes) -> None:
    """Overwrite the file's bytes (same inode: links, owner and attributes stay). Space is
    reserved first, so a full disk fails before any byte changes."""
    descriptor = os.open(real, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if hasattr(os, "posix_fallocate") and data:
            try:
                os.posix_fallocate(descriptor, 0, len(data))
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
                    raise
        written = 0
        view = memoryview(data)
        while written < len(data):
            written += os.pwrite(descriptor, view[written:], written)
        os.ftruncate(descriptor, len(data))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise SourceReadError(path, f"cannot read: {exc.strerror or exc}") from exc
