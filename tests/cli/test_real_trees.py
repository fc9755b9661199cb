"""Output that fits a real optimizer tree: an Adam step whose state (optax's shape, 9 leaves)
is streamed from host memory, written with flax and optax where they are installed and
without them everywhere, run as a user runs it (the installed command, a real terminal's
width in mind): each output once, by the whole sub-trees it makes up, and a fix in one line."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from tests.cli_support import REPO, offload_fixer

PROGRAMS = REPO / "tests" / "runner_programs"
needs_pinned_host = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="this JAX's CPU build has no pinned_host memory"
)
FLAX_AND_OPTAX = all(importlib.util.find_spec(name) is not None for name in ("flax", "optax"))
WIDTH = 140
"""The widest line of the report the tool writes itself (XLA's own messages are quoted whole)."""


def written_by_the_tool(line: str) -> bool:
    """A finding's first line quotes XLA's message as XLA words it; every other line is ours."""
    return not re.match(r"\S+:\d+:\d+: OFL\d{4} ", line)


@needs_pinned_host
@pytest.mark.parametrize(
    "program",
    [
        "adam_tree_host_state.py",
        pytest.param(
            "flax_adam_host_state.py",
            marks=pytest.mark.skipif(not FLAX_AND_OPTAX, reason="flax and optax are not installed"),
        ),
    ],
)
def test_a_streamed_optimizer_state_is_reported_by_whole_sub_trees(tmp_path: Path, program: str):
    shutil.copy(PROGRAMS / program, tmp_path)
    done = offload_fixer("run", "--color", "never", program, cwd=tmp_path)
    assert done.returncode == ExitCode.FINDINGS, done.stdout + done.stderr
    lines = done.stdout.splitlines()

    at = lines.index("  outputs (13):")  # 13 flat outputs: 4 parameters, 9 state leaves; each once
    assert lines[at + 1 : at + 3] == [
        "    [0] (4 leaves, flat outputs 0-3) from 9 leaves of opt_state[0] (.count, .mu, .nu)",
        "    [1] (9 leaves, flat outputs 4-12) from 9 leaves of opt_state[0] (.count, .mu, .nu)",
    ]
    assert lines[at + 3].startswith("   1. ")  # the trace follows: nothing else is listed
    assert "opt_state[0].mu[" not in done.stdout  # the other state leaves that reach a computation: in one phrase

    fixes = [i for i, line in enumerate(lines) if line.startswith("  fix [*]: ")]
    assert len(fixes) == 2  # the OFL1200 and the OFL1201 of one root cause
    for i in fixes:
        assert re.fullmatch(
            r"  fix \[\*\]: Move argument opt_state to device where train_step starts \(line \d+\); "
            r"keep the returned state host memory \(line \d+\)",
            lines[i],
        ), lines[i]
        assert lines[i + 1] == "           out_shardings keeps 9 outputs under [1][0] (.count, .mu, .nu) host memory"
    assert max(len(line) for line in lines if written_by_the_tool(line)) <= WIDTH
    assert len(lines) <= 40


@needs_pinned_host
def test_explain_names_each_output_once_by_its_pytree_path(tmp_path: Path):
    """The dump of the same step (compiled on this machine's CPU, as a TPU run dumps it) and
    XLA's error naming the state's count: the other outputs it reaches, once each, by path."""
    program = shutil.copy(PROGRAMS / "adam_tree_host_state.py", tmp_path)
    dump = tmp_path / "dump"
    # compiled, not read from the tests' compilation cache: XLA dumps only what it compiles
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_dump_to={dump}",
        "JAX_PLATFORMS": "cpu",
        "JAX_ENABLE_COMPILATION_CACHE": "0",
    }
    ran = subprocess.run([sys.executable, program], env=env, check=False, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    (hlo,) = dump.glob("module_*.jit_train_step.before_optimizations.txt")
    count = re.search(r"%?([\w.\-]+) = s32\[\] parameter\(4\)", hlo.read_text()).group(1)
    log = tmp_path / "err.log"
    log.write_text(
        "jax.errors.JaxRuntimeError: INVALID_ARGUMENT: Tensor which is moved to host (starting from "
        f"{count}) is returned from the entry computation but the layout for this output is not set to "
        "host memory.\n"
    )
    done = offload_fixer("explain", str(log), "--dump", str(dump), cwd=tmp_path)
    assert done.returncode == ExitCode.FINDINGS, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "also reaches 12 outputs under [0], [1] (flat outputs 0-3, 5-12)." in text, done.stdout

    only_hlo = tmp_path / "hlo"
    only_hlo.mkdir()
    shutil.copy(hlo, only_hlo)  # no pytree paths in it: the outputs by their flat index
    done = offload_fixer("explain", str(log), "--dump", str(only_hlo), cwd=tmp_path)
    assert "also reaches flat outputs 0-3, 5-12." in " ".join(done.stdout.split()), done.stdout
    assert "#" not in done.stdout
