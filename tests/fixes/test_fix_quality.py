"""The fix-quality corpus (``tests/fixes/quality/``): under ``auto``, every program's OFL1200
findings get a fix that holds, or the verification stage says why none does, and a written fix
holds as ``scripts/fix_quality.py`` judges it: the fixed function lowers again from the fixed
source, libtpu and the CUDA plugin compile it, ``example()`` gives the same outputs on CPU,
every argument keeps its memory kind and every output the one its author intends, libtpu
reports the fix's memory figures before and after and against the program without its offload
(which it holds less HBM than), and no other candidate plan that compiles and places the
outputs alike holds fewer HBM bytes (a host stack moved whole where moving each slice holds
less). What the chip measured of the written fixes (``tests/chip/record.json``) is of these
very fixes: a fix that changes makes the record stale.

The corpus runs in a few subprocesses (the script needs 8 CPU devices, which a process must ask
for before JAX starts), one per shard of programs, so xdist spreads them over its workers."""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.model import HBM_FLOOR

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 4
RECORD = ROOT / "tests" / "chip" / "record.json"

pytestmark = pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="the corpus is written for JAX >= 0.7.1 with pinned_host memory on the CPU",
)


def _script():
    spec = importlib.util.spec_from_file_location("fix_quality", ROOT / "scripts" / "fix_quality.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


PROGRAMS = [p.stem for p in _script().programs()]


def test_the_corpus_covers_what_the_issue_lists():
    assert len(PROGRAMS) >= 40
    for family in ("mesh8", "scan_stream", "remat", "donated", "dataclass", "namedtuple", "kv_cache", "scatter"):
        assert any(family in name for name in PROGRAMS), family
    texts = {name: (ROOT / "tests" / "fixes" / "quality" / f"{name}.py").read_text() for name in PROGRAMS}
    assert any("quality_shardings" in text for text in texts.values())
    assert all("def example()" in text for text in texts.values())


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_auto_fix_of_the_corpus_holds(shard, tpu_compiler, gpu_compiler, tmp_path):
    names = PROGRAMS[shard::SHARDS]
    out = tmp_path / "rows.json"
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fix_quality.py"), "--strategy", "auto", "--json", str(out), *names],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=ROOT,
    )
    assert out.exists(), done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [r["program"] for r in rows] == names
    record = {p["program"]: p for p in json.loads(RECORD.read_text())["programs"]} if RECORD.exists() else {}
    failures = []
    for r in rows:
        checks = {k: r[k] for k in ("lowers", "tpu", "gpu", "cpu", "placement")}
        if r["findings"] == 0:
            failures.append(f"{r['program']}: no OFL1200 finding")
        elif r["fix"] != "fixed":
            # no fix holds: the verification stage says why (the compiler's or the analysis's
            # words, or the HBM figures of a fix that would defeat the offload)
            if not r["why"].startswith("refused: ") or "not confirmed by the compiler" not in r["why"]:
                failures.append(f"{r['program']}: left without the verification's reason: {r['why']}")
        elif (
            r["safe"] != r["findings"]
            or not all(checks.values())
            or r["hbm_after"] is None
            or r["hbm_before"] is None  # every fix reports its HBM delta
            or r["hbm_no_offload"] is None
            # the offload keeps its purpose: no more HBM than without it, but for HBM_FLOOR (the
            # runtime's own buffers: a fixed program of kilobytes compiles to a few hundred KiB)
            or (r["host_after"] and r["hbm_after"] > r["hbm_no_offload"] + HBM_FLOOR)
            or r["narrower"]  # another valid plan, compiled alone, holds fewer HBM bytes
        ):
            failures.append(
                f"{r['program']}: {r['fix']} {r['why']} {checks} {r['placement_why']} {r['problems']} "
                f"HBM {r['hbm_before']} -> {r['hbm_after']} (no offload {r['hbm_no_offload']}) {r['narrower']}"
            )
        chip = record.get(r["program"])
        if chip is not None and hashlib.sha256(r["fixed_text"].encode()).hexdigest() != chip.get(
            "fixed_sha256", hashlib.sha256(b"").hexdigest()
        ):
            failures.append(f"{r['program']}: the fix is not the one the chip ran: refresh {RECORD.name}")
    assert not failures, "\n".join(failures)
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_fix_a_valid_plan_holds_less_than_fails_and_one_placing_outputs_otherwise_does_not_count():
    """The check is measured plan by plan (each candidate compiled alone), not read from the
    choice: here a slice-by-slice plan holds less than the whole move written, so the row fails;
    a plan returning the state in device memory holds less still, but places outputs otherwise."""
    from types import SimpleNamespace

    from offload_fixer.model import Diagnostic
    from offload_fixer.verify.choice import Trial

    script = _script()
    diagnostic = Diagnostic.from_dict(
        {"code": "OFL1200", "severity": "error", "message": "m", "target": "tpu", "explanation": "e"}
    )
    host, device = (("pinned_host", "device"),), (("device", "device"),)
    whole, sliced, undone = (
        SimpleNamespace(title=t, edits=(t,), path="p.py", diagnostics=(diagnostic,)) for t in ("whole", "slice", "dev")
    )
    figures = {"whole": (340, host), "slice": (300, host), "dev": (100, device)}
    confirmation = SimpleNamespace(
        check=lambda path, plans: Trial(
            True, compiled=True, device_bytes=figures[plans[0].title][0], placement=figures[plans[0].title][1]
        )
    )
    from offload_fixer.findings import root_cause_key

    alternatives = {("p.py", root_cause_key(diagnostic)): [sliced, whole, undone]}
    row = script.Row("program", "auto", fix="fixed")
    script._compare_candidates(row, confirmation, "p.py", [whole], alternatives)
    assert row.compared == 1 and row.narrower == ["slice: HBM 300 B, the fix 340 B"]
    assert not row.good
    figures["slice"] = (400, host)
    kept = script.Row("program", "auto", fix="fixed")
    script._compare_candidates(kept, confirmation, "p.py", [whole], alternatives)
    assert kept.compared == 1 and kept.narrower == [] and kept.good
