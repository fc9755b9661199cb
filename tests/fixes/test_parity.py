"""One plan per finding, whoever asks (issue 22, item 6): ``check`` (the static check's
findings), ``run`` (the analysis of the lowered program, with its output tree) and the editor
(``lsp.engine.plan_on_text`` on the buffer's text) write the same edit for a program where both
engines find the same OFL1200 outputs, or ``check`` labels its plan unsafe with the reason (it
cannot tell from the source whether an output is the host state; ``run`` sees the types).
``scripts/fix_parity.py`` measures this over every such program.

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
STATIC = ROOT / "tests" / "static_vs_dynamic"
PROGRAMS = {
    "adam_moments_mesh4": "same",  # moments read by key: moved where they are read
    "tuple_state_positional": "same",  # two streamed parameters: one order of moves
    "scan_stream_layers_mesh4": "same",  # a scanned stack: moved slice by slice; the mean is a new value
    "sharded_moments_columns_mesh8": "same",  # the returned state kept host memory
    "kv_cache_block_swap": "same",
    "while_loop_host_carry": "same",  # the carry starts from the state: kept host memory
    "scan_xs_host_layers": "same",  # the carry is tanh(h @ w): a new device value
    # one array out, made from the state and an operand of unknown shape: run sees the types
    "host_bias_elementwise": "unsafe",  # relu(x + bias): broadcast past the bias
    "mesh_2x4_host_params": "unsafe",  # w - 0.1 * g
    "cond_on_host_param": "unsafe",  # branches w * x, w + x
}
"""Program -> ``same`` (check writes run's fix) or ``unsafe`` (check labels its plan unsafe,
with a reason, and writes nothing run would not)."""

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
    unsafe = {}
    for engine, plans in (
        ("run", plan_fixes(reports, "auto")),
        ("check", plan_fixes(static, "auto")),
        ("editor", plan_on_text(static, data.decode(), str(path), "auto", Settings())),
    ):
        fixed = apply_to_source(str(path), data, plans)
        texts[engine] = fixed.new_text if fixed.changed else None
        labelled = [plan for plan in plans if plan.safety == "unsafe"]
        assert all(plan.unsafe_reasons for plan in labelled), (engine, "an unsafe label without a reason")
        unsafe[engine] = [r for plan in labelled for r in plan.unsafe_reasons]
    out[path.stem] = {
        "same_findings": found(dynamic) == found(static) and bool(found(static)),
        "check_unsafe": unsafe["check"],
        **texts,
    }
print(json.dumps(out))
"""


@pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="the corpus is written for JAX >= 0.7.1 with pinned_host memory on the CPU",
)
def test_check_run_and_editor_write_the_same_fix(tmp_path: Path) -> None:
    for source in [
        *CORPUS.glob("*.py"),
        *(STATIC / f"{name}.py" for name in PROGRAMS if (STATIC / f"{name}.py").exists()),
    ]:
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
    for name, expected in PROGRAMS.items():
        result = results[name]
        assert result["same_findings"], f"{name}: the engines no longer find the same OFL1200 outputs"
        assert result["run"] is not None, f"{name}: run writes no fix"
        assert result["editor"] == result["check"], f"{name}: the editor and check write different fixes"
        if expected == "same":
            assert result["check"] == result["run"], f"{name}: check and run write different fixes"
        else:
            assert result["check"] is None, f"{name}: check writes a fix it cannot vouch for"
            assert any("cannot tell statically" in r for r in result["check_unsafe"]), result["check_unsafe"]
