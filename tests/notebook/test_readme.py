"""The README's notebook transcripts are what the installed command prints today."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat

from ..readme_transcripts import transcripts

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [t for t in transcripts() if t.command and "ipynb" in t.command]


def test_the_readme_has_the_notebook_transcripts():
    assert [t.command for t in COMMANDS] == [
        "offload-fixer check examples/ema_on_host_notebook.ipynb",
        "offload-fixer check --diff --unsafe-fixes examples/ema_on_host_notebook.ipynb",
    ]


@pytest.mark.skipif(jax_compat.regime() is not jax_compat.Regime.TYPED,
                    reason="the README shows the rules of the pinned JAX (memory space in the type)")
@pytest.mark.parametrize("transcript", COMMANDS, ids=lambda t: t.command)
def test_transcript_is_real_output(transcript):
    executable = Path(sys.executable).with_name("offload-fixer")
    if not executable.exists():
        pytest.skip("offload-fixer is not installed in this environment")
    _, *arguments = shlex.split(transcript.command)
    result = subprocess.run([str(executable), *arguments], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "100"}, timeout=300)
    assert result.stderr == ""
    assert result.stdout == transcript.output
