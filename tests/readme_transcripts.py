"""The README's console transcripts: each ```console block after a ``<!-- transcript: ... -->``
comment is real output, and the tests that own a transcript compare it with a fresh run.

    for transcript in transcripts():         # in README order
        transcript.name, transcript.command, transcript.output
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"<!-- transcript: (?P<name>.+?) -->\n```console\n(?P<body>.*?)```\n", re.DOTALL)


@dataclass(frozen=True)
class Transcript:
    name: str
    command: str | None
    """The ``$ `` line's command, when the block starts with one."""
    output: str


def transcripts(readme: Path = README) -> list[Transcript]:
    found = []
    for match in _BLOCK.finditer(readme.read_text(encoding="utf-8")):
        body = match.group("body")
        command = None
        if body.startswith("$ "):
            first, _, body = body.partition("\n")
            command = first[2:]
        found.append(Transcript(match.group("name"), command, body))
    return found


def transcript(name: str) -> Transcript:
    return next(t for t in transcripts() if t.name == name)


def readme_script():
    """``scripts/readme.py``, which writes and checks the README's transcripts, as a module."""
    spec = importlib.util.spec_from_file_location("readme", README.parent / "scripts" / "readme.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
