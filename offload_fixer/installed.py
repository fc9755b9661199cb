"""Versions of installed distributions, as ``importlib.metadata.version`` finds them, without
importing it: its import alone (email parsing, zip files) costs more than ``--version``."""

from __future__ import annotations

import os
import sys


def version(name: str) -> str | None:
    """The version of the distribution ``name`` (None: not installed) from the first entry of
    ``sys.path`` that holds its metadata. Where that is a ``.dist-info`` directory, the
    version is read from the directory's name, which installers write as
    ``{name}-{version}.dist-info``; any other layout (an egg, a zip, two of them) is left to
    ``importlib.metadata``."""
    for entry in sys.path:
        try:
            found = [item for item in os.listdir(entry or ".") if _is_metadata_of(name, item.lower())]
        except OSError:
            continue
        if not found:
            continue
        versions = [item[len(name) + 1 : -len(".dist-info")] for item in found if item.endswith(".dist-info")]
        if len(versions) == 1 and len(found) == 1 and versions[0][:1].isdigit():
            return versions[0]
        break
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _is_metadata_of(name: str, item: str) -> bool:
    return item.startswith((f"{name}-", f"{name}.")) and item.endswith((".dist-info", ".egg-info", ".egg"))
