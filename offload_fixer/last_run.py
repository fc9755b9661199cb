"""Where ``offload-fixer run`` leaves its findings for the editor: ``.offload-fixer/last-run.json``.

Every ``run`` writes its report (the same JSON as ``run --report FILE``) to
``<project>/.offload-fixer/last-run.json``, where ``<project>`` is the nearest directory above
the program that holds a ``pyproject.toml``, ``setup.cfg``, ``setup.py`` or ``.git`` (the
current directory when none does, or for ``run -m``). The directory gets a ``.gitignore`` of
``*``, as tool caches do, so it is never committed (repaired where it is missing or not whole),
and is never followed out of the project (:mod:`offload_fixer.state_folders`). The language server looks for the nearest
``.offload-fixer/last-run.json`` above each open document and shows the findings that name it,
while the document still holds the lines the run analysed. Nothing here executes code.
"""

from __future__ import annotations

import os
from pathlib import Path

from offload_fixer.state_folders import StateFolder

DIRECTORY = ".offload-fixer"
FILE_NAME = "last-run.json"
GITIGNORE = "# written by offload-fixer run\n*\n"
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
WATCH_GLOB = f"**/{DIRECTORY}/{FILE_NAME}"
"""The pattern an editor watches to learn of a new run."""


def project_directory(start: str | os.PathLike[str]) -> Path:
    """The nearest directory at or above ``start`` that looks like a project's root."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for directory in (here, *here.parents):
        if any((directory / marker).exists() for marker in PROJECT_MARKERS):
            return directory
    return Path.cwd()


def report_path_for(program: str | os.PathLike[str] | None) -> Path:
    """Where a run of ``program`` (None: a module run from the current directory) writes."""
    return project_directory(program if program is not None else Path.cwd()) / DIRECTORY / FILE_NAME


def folder_for(program: str | os.PathLike[str] | None) -> StateFolder:
    """The folder a run of ``program`` keeps its report in, with its ``.gitignore``."""
    project = project_directory(program if program is not None else Path.cwd())
    return StateFolder(project, (DIRECTORY,), {".gitignore": GITIGNORE})


def find_for(document: str | os.PathLike[str]) -> Path | None:
    """The nearest last-run report at or above a document's directory; one whose folder leads
    out of the directory that holds it (a symlink elsewhere) is not read."""
    here = Path(document).resolve().parent
    for directory in (here, *here.parents):
        candidate = directory / DIRECTORY / FILE_NAME
        if candidate.is_file():
            folder = os.path.realpath(directory / DIRECTORY)
            return candidate if folder.startswith(str(directory).rstrip(os.sep) + os.sep) else None
    return None
