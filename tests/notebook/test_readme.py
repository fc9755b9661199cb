"""The README's notebook transcripts are what the installed command prints today (run as
``scripts/readme.py`` runs every transcript: stdout and stderr as a terminal shows them)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from offload_fixer import jax_compat

from ..readme_transcripts import readme_script, transcripts

COMMANDS = [t for t in transcripts() if t.command and "ipynb" in t.command]


def test_the_readme_has_the_notebook_transcripts():
    assert [t.command for t in COMMANDS] == [
        "offload-fixer check examples/ema_on_host_notebook.ipynb",
        "offload-fixer check --diff examples/ema_on_host_notebook.ipynb",
    ]


@pytest.mark.skipif(
    jax_compat.installed_version() != readme_script().pinned_jax(),
    reason="the README's transcripts are made with the JAX constraints.txt pins",
)
@pytest.mark.skipif(
    shutil.which("offload-fixer", path=os.path.dirname(sys.executable)) is None,
    reason="offload-fixer is not installed in this environment",
)
@pytest.mark.parametrize("transcript", COMMANDS, ids=lambda t: t.command)
def test_transcript_is_real_output(transcript):
    scratch = readme_script().Scratch()
    try:
        assert scratch.run(transcript.command) == transcript.output
    finally:
        scratch.close()
