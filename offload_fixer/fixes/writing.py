"""Writing a fixed file: atomically where the file allows it, keeping its owner, mode, extended
attributes and hard links, only if it still holds the bytes that were analysed, and only
where its path led when it was checked."""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING

from offload_fixer.fixes.errors import (
    NOTHING_WRITTEN,
    OutsideScopeError,
    ReadOnlySourceError,
    SourceChangedError,
    SourceReadError,
)
from offload_fixer.interrupts import uninterrupted
from offload_fixer.resolved_paths import Directory, PathChangedError, resolve

if TYPE_CHECKING:
    from offload_fixer.fixes.scope import WriteScope


def write_source(path: str, expected: bytes, data: bytes, scope: WriteScope | None = None) -> None:
    """Replace the content of the file (a symlink's target) with ``data``, keeping the file:
    its mode, owner, group, extended attributes (ACLs) and hard links.

    The path is resolved once: ``scope`` (the files a fix may write) judges that resolution,
    and the file is then opened and written through its directory opened at it, never by
    name again (:mod:`offload_fixer.resolved_paths`). A directory or the file swapped for a
    symlink since is refused with the path's name (:class:`OutsideScopeError`).

    Normally by a temporary file in the same directory, given the original's metadata, then
    renamed over it: a reader or an interrupted run sees the old bytes or the new ones, never
    a mix. Where a rename cannot keep the file — it has other hard links (they would keep the
    old content), or its owner, group or attributes cannot be given to a new file, or its
    directory is not writable — the bytes are written into the file itself instead, after
    the same checks (see ``README.md``, "Writing"). A file without write permission is
    refused even where the rename would succeed (as root): read-only is the user's choice.
    """
    try:
        real = resolve(path)
    except PathChangedError as exc:
        raise OutsideScopeError(path, f"{exc.why}; {NOTHING_WRITTEN}") from exc
    if scope is not None and (why := scope.refusal(path, real)) is not None:
        raise OutsideScopeError(path, f"{why}; {NOTHING_WRITTEN}")
    directory, name = os.path.split(real)
    try:
        with Directory(directory) as folder:
            _write_checked(path, folder, name, expected, data)
    except PathChangedError as exc:
        raise OutsideScopeError(path, f"{exc}, since it was checked; {NOTHING_WRITTEN}") from exc
    except FileNotFoundError as exc:
        raise SourceReadError(path, f"cannot open: {exc.strerror or exc}") from exc


def _write_checked(path: str, folder: Directory, name: str, expected: bytes, data: bytes) -> None:
    """:func:`write_source` of the file ``name`` of ``folder``, the file opened once."""
    try:
        handle = folder.open(name, os.O_RDONLY)
    except OSError as exc:
        if isinstance(exc, PathChangedError):
            raise
        raise SourceReadError(path, f"cannot open: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise SourceReadError(path, "is not a regular file; nothing was written")
        if not info.st_mode & stat.S_IWUSR or not folder.access(name, os.W_OK):
            raise ReadOnlySourceError(path, "is read-only; nothing was written")
        if _file_bytes(path, handle) != expected:
            raise SourceChangedError(path, "changed while it was being fixed; nothing was written")
        try:
            if info.st_nlink > 1 or not _replace_keeping_metadata(folder, name, handle, info, data):
                with uninterrupted():
                    _write_in_place(folder, name, info, data)
        except PathChangedError:
            raise
        except OSError as exc:
            raise ReadOnlySourceError(path, f"cannot be written ({exc.strerror or exc}); nothing was written") from exc
    finally:
        os.close(handle)


def _replace_keeping_metadata(folder: Directory, name: str, original: int, info: os.stat_result, data: bytes) -> bool:
    """Write ``data`` to a temporary file with ``info``'s owner, group, mode and extended
    attributes and rename it over ``name``; False (nothing changed) where one of them cannot
    be given to the new file or no file can be created next to it."""
    try:
        descriptor, temporary = folder.create(f".{name}.")
    except OSError:
        return False
    try:
        with os.fdopen(descriptor, "wb") as stream:
            if not _copy_metadata(original, descriptor, info):
                folder.unlink(temporary)
                return False
            stream.write(data)
            stream.flush()
            os.fsync(descriptor)
        folder.replace(temporary, name)
    except BaseException:
        try:
            folder.unlink(temporary)
        except OSError:
            pass
        raise
    return True


def _copy_metadata(original: int, descriptor: int, info: os.stat_result) -> bool:
    """Give the new file the original's owner, group, mode and extended attributes (ACLs,
    security labels); False where the system does not let this process do so."""
    created = os.fstat(descriptor)
    try:
        if (created.st_uid, created.st_gid) != (info.st_uid, info.st_gid):
            os.fchown(descriptor, info.st_uid, info.st_gid)
        os.fchmod(descriptor, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits
        wanted, present = _xattrs(original), _xattrs(descriptor)
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


def _xattrs(file: int) -> dict[str, bytes]:
    if not hasattr(os, "listxattr"):
        return {}
    try:
        return {name: os.getxattr(file, name) for name in os.listxattr(file)}
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise


def _write_in_place(folder: Directory, name: str, info: os.stat_result, data: bytes) -> None:
    """Overwrite the file's bytes (same inode: links, owner and attributes stay). Space is
    reserved first, so a full disk fails before any byte changes. The file opened for writing
    must be the one checked (``info``): anything else there now is refused."""
    descriptor = folder.open(name, os.O_WRONLY)
    try:
        now = os.fstat(descriptor)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            raise PathChangedError(os.path.join(folder.real, name), "is another file now")
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


def _file_bytes(path: str, handle: int) -> bytes:
    try:
        chunks = []
        offset = 0
        while chunk := os.pread(handle, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise SourceReadError(path, f"cannot read: {exc.strerror or exc}") from exc
