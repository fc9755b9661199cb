"""Every example runs as a script on CPU, exits 0, and prints what it claims to show; ``run``
over it finds what its ``.expected.json`` records, its eager operations included."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from examples_support import (
    EXAMPLE_NAMES,
    EXAMPLE_PATHS,
    SKIP_REASON,
    import_example,
    is_jitted,
    jax_runs_examples,
    load_expected,
)

pytestmark = pytest.mark.skipif(not jax_runs_examples(), reason=SKIP_REASON)

# What each example must print: where its offloaded state ended up, and for the decoder the
# check against a cache-free recomputation. The unpinned trap's snapshot reports "device".
MUST_PRINT = {
    "activation_offload": [],
    "activation_offload_residuals": ["offloaded residuals live in: ['device', 'pinned_host']"],
    "compute_on_host_ema": ["EMA lives in: pinned_host"],
    "kv_cache_host": ["cache lives in: pinned_host", "matches full recompute: True"],
    "optimizer_offload": ["moments live in: pinned_host"],
    "optimizer_offload_broken": ["moments live in: pinned_host"],
    "param_streaming": ["weights live in: pinned_host"],
    "param_streaming_broken": ["weights live in: pinned_host"],
    "pod_train": ["compiled for {'fsdp': 1, 'tensor': 1} on 1 cpu devices", "parameters live in: pinned_host"],
    "scan_stream_to_host": ["trajectory lives in: pinned_host"],
    "unpinned_host_trap": ["snapshot lives in: device"],
}
LOSS = re.compile(r"^step\s+\d+\s+loss (\S+)$", re.MULTILINE)


def test_every_example_has_output_expectations():
    assert sorted(MUST_PRINT) == EXAMPLE_NAMES


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=EXAMPLE_NAMES)
def test_example_runs_on_cpu(path):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, str(path)], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for text in MUST_PRINT[path.stem]:
        assert text in done.stdout, done.stdout
    losses = [float(x) for x in LOSS.findall(done.stdout)]
    if losses:
        assert losses[-1] < losses[0] / 2, f"loss did not go down: {losses}"
    assert done.stdout.strip(), "an example must print what it did"


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_imports_without_running(name, capsys):
    module = import_example(name)
    assert capsys.readouterr().out == ""
    assert callable(module.main)
    assert any(is_jitted(value) for value in vars(module).values())


WARNINGS_NOT_RECORDED = {"OFL1201", "OFL1206"}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=EXAMPLE_NAMES)
def test_run_finds_what_the_expected_file_records_eager_operations_included(path, capsys):
    """``run`` sees every compilation the program makes, JAX's own jits for its eager
    operations too (a strided index of a host array fails on a TPU, as the last line of
    ``scan_stream_to_host.py`` did): an eager finding is recorded at its line, its function
    the name ``run`` gives it (``slice (eager)``)."""
    from offload_fixer.findings import location
    from offload_fixer.runner import run_program

    result = run_program(str(path), target="tpu")
    assert result.program_exit_code == 0, result.program_exception
    found = set()
    for report in result.reports:
        name = report.function.name if report.function else None
        for d in report.diagnostics:
            if d.code in WARNINGS_NOT_RECORDED:
                continue
            eager = bool(name and name.endswith("(eager)"))
            line = location(d).line if eager else (d.origin.span.line if d.origin and d.origin.span else None)
            found.add((d.code, line, d.output_path, name))
    expected = {(e["code"], e["line"], e["output_path"], e["function"]) for e in load_expected(path.stem)}
    assert found == expected
