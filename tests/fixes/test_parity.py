"""One plan per finding, whoever asks (issue 22, item 6): ``check`` (the static check's
findings), ``run`` (the analysis of the lowered program, with its output tree) and the editor
(``lsp.engine.plan_on_text`` on the buffer's text) write the same edit for a program where both
engines find the same OFL1200 outputs.

The programs are from the fix-quality corpus (4- and 8-device meshes): they run in a subprocess,
which must ask for 8 CPU devices before JAX starts."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixes" / "quality"
PROGRAMS = (
    "adam_moments_mesh4",  # moments read by key: moved where they are read
    "tuple_state_positional",  # two streamed parameters: one order of moves
    "host_bias_elementwise",  # one array out, a new value: stays device memory
    "scan_stream_layers_mesh4",  # a scanned stack: moved slice by slice
    "sharded_moments_columns_mesh8",  # the returned state kept host memory
    "kv_cache_block_swap",
)

SCRIPT = """
import contextlib, io, json, sys
from pathlib import Path
from offload_fixer.config import Settings
from offload_fixer.fixes import plan_fixes
from offload_fixer.fixes.apply import apply_to_source
from offload_fixer.lsp.engine import plan_on_text
from offload_fixer.runner import run_program
from offload_fixer.static.api import check_source

out = {}
for name in sys.argv[1:]:
    path = Path(name)
    data = path.read_bytes()
    with contextlib.redirect_stdout(io.StringIO()):
        reports = run_program(str(path), [], target="tpu").reports
    dynamic = [d for r in reports for d in r.diagnostics]
    static = list(check_source(data, str(path)).diagnostics)
    def found(ds):
        return sorted({(d.function.name if d.function else "", d.output_path or "") for d in ds if d.code == "OFL1200"})
    texts = {}
    for engine, plans in (
        ("run", plan_fixes(reports, "auto")),
        ("check", plan_fixes(static, "auto")),
        ("editor", plan_on_text(static, data.decode(), str(path), "auto", Settings())),
    ):
        fixed = apply_to_source(str(path), data, plans)
        texts[engine] = fixed.new_text if fixed.changed else None
        reasons = [p for plan in plans if plan.safety == "unsafe" for p in plan.unsafe_reasons]
        assert all(reasons), (engine, "an unsafe label without a reason")
    out[path.stem] = {"same_findings": found(dynamic) == found(static) and bool(found(static)), **texts}
print(json.dumps(out))
"""


@pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="the corpus is written for JAX >= 0.7.1 with pinned_host memory on the CPU",
)
def test_check_run_and_editor_write_the_same_fix(tmp_path: Path) -> None:
    for source in CORPUS.glob("*.py"):
        (tmp_path / source.name).write_bytes(source.read_bytes())  # the programs import their helpers
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *(str(tmp_path / f"{name}.py") for name in PROGRAMS)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    for name in PROGRAMS:
        result = results[name]
        assert result["same_findings"], f"{name}: the engines no longer find the same OFL1200 outputs"
        assert result["run"] is not None, f"{name}: no fix written"
        assert result["check"] == result["run"], f"{name}: check and run write different fixes"
        assert result["editor"] == result["check"], f"{name}: the editor and check write different fixes"
