"""``offload-fixer run`` on pod programs, from one machine: a TPU pod's devices as the program's
own (``--topology``), and a program of several processes under ``jax.distributed``."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from offload_fixer.jax_compat.pod import pod_view
from offload_fixer.report_file import (
    AbstractCall,
    MissingDevices,
    decode_call,
    encode_call,
    read_report_file,
    write_report_file,
)
from offload_fixer.xla import installed
from tests.cli_support import command, environment, offload_fixer, without_plugin_noise

POD_PROGRAM = """\
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

MESH = Mesh(np.array(jax.devices()).reshape(-1, 4), ("fsdp", "tensor"))
ON_HOST = NamedSharding(MESH, P("fsdp", "tensor"), memory_kind="pinned_host")


@jax.jit
def step(weights, x):
    return weights * 0.9, jnp.sum(weights**2) + x.sum()


def main():
    jax.distributed.initialize()
    step.lower(jax.ShapeDtypeStruct((64, 32), jnp.float32, sharding=ON_HOST), jax.ShapeDtypeStruct((8,), jnp.float32))
    print("lowered for", dict(MESH.shape), "as process", jax.process_index(), "of", jax.process_count())
    weights = jax.device_put(np.ones((64, 32), np.float32), ON_HOST)
    print("never here on a machine without the pod", weights.shape)


if __name__ == "__main__":
    main()
"""
"""A pod program: its mesh over ``jax.devices()``, its step lowered from abstract shapes
(the norm of the host copy of the weights: error 1200), then data put on the pod's chips."""

needs_libtpu = pytest.mark.skipif(installed("tpu") is None, reason="libtpu is not installed")
needs_host_memory = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="this JAX's CPU backend has no pinned_host memory"
)


@needs_libtpu
def test_a_pod_program_is_checked_for_the_pod_from_one_machine(tmp_path: Path):
    (tmp_path / "pod.py").write_text(POD_PROGRAM)
    # --strategy device: moving the host weights into HBM for good is what is asked (under auto,
    # the fix would hold more HBM than the program without offload and is refused)
    first = offload_fixer(
        "run",
        "-v",
        "--confirm",
        "--strategy",
        "device",
        "--report",
        "report.json",
        "--topology",
        "v5e-256",
        "pod.py",
        cwd=tmp_path,
    )
    assert first.returncode == ExitCode.FINDINGS, first.stdout + first.stderr
    assert "lowered for {'fsdp': 64, 'tensor': 4} as process 0 of 64" in first.stdout
    assert "never here" not in first.stdout and "Traceback" not in first.stderr
    # told where it needed the chips, and that what came before was checked
    assert "offload-fixer: pod.py:20:15: jax.device_put needs the v5e-256 pod's chips" in first.stderr
    assert "for tpu on v5e-256; the program needed the pod's chips to go on" in first.stderr
    report = first.stdout
    assert "pod.py:11:2: OFL1200 [*] " in report and "output: [1] (flat output 1)" in report
    assert re.search(r"weights: f32\[64,32\] (as P\('fsdp', 'tensor'\)|split 64x4): f32\[1,8\] per device", report)
    # the fix was lowered from the fixed file imported seeing the pod, whose mesh it builds at import
    assert "fix [*]: Move argument weights to device where step starts" in report
    assert "0 of 1 verdicts read from .offload-fixer-cache/" in first.stderr
    assert "xla: confirmed by libtpu" in report
    # the report keeps the pod: its fix is compiled for the same 256 devices later
    fixed = offload_fixer("fix", "--confirm", "--strategy", "device", "report.json", cwd=tmp_path)
    assert fixed.returncode == ExitCode.CLEAN, fixed.stdout + fixed.stderr
    assert "pod.py: the fix compiles (libtpu" in fixed.stderr and "confirmed 1 compilation)" in fixed.stderr
    assert "Found 2 problems (2 fixed, 0 remaining)." in fixed.stdout
    assert "device_put(weights" in (tmp_path / "pod.py").read_text()


def test_a_second_run_of_an_unchanged_pod_program_reads_its_verdicts(tpu_pod, tmp_path: Path):
    """What the first run found is kept; the second reads it back instead of analysing, with
    the same findings, and a run for another pod or another target computes its own."""
    from offload_fixer.runner import run_program
    from offload_fixer.topology import parse_topology
    from offload_fixer.verdicts import VerdictCache

    program = tmp_path / "pod.py"
    program.write_text(POD_PROGRAM)

    def run(topology: str, target: str = "tpu") -> tuple[list, VerdictCache]:
        verdicts = VerdictCache(tmp_path)
        result = run_program(str(program), target=target, topology=parse_topology(topology), verdicts=verdicts)
        assert result.needs_pod is not None, result.program_exception
        return result.diagnostics, verdicts

    # from one line: the frames above the program are in its module's locations, and so in the key
    (first, cold), (again, cached) = (run("v5e:4x4") for _ in range(2))
    assert (cold.hits, cold.misses, cached.hits, cached.misses) == (0, 1, 1, 0)
    # (JAX 0.6.2's output of ``weights * 0.9`` is device memory: a second OFL1200 there)
    assert again == first and {d.code for d in first} == {"OFL1200", "OFL1201"}
    assert run("v5e:4x8")[1].misses == 1  # another pod: another module, another verdict


def test_a_reports_calls_on_a_pods_mesh_are_read_back_on_its_devices(tpu_pod, tmp_path: Path):
    """``run --topology --report``: the pod and each call's meshes (by their devices' ids) are
    kept, so that ``fix`` lowers the fixed function on the same devices; without the pod they
    cannot be made, and that is said rather than guessed."""
    with pod_view(tpu_pod):
        mesh = jax.make_mesh((4, 4), ("fsdp", "tensor"))
        weights = jax.ShapeDtypeStruct(
            (64, 32), jnp.float32, sharding=NamedSharding(mesh, P(("fsdp", "tensor")), memory_kind="pinned_host")
        )
        batch = jax.ShapeDtypeStruct((16, 8), jnp.float32, sharding=NamedSharding(mesh, P("fsdp", None)))
        encoded = json.loads(json.dumps(encode_call(AbstractCall(None, (weights,), {"batch": batch}))))
        assert len(encoded["meshes"]) == 1  # the mesh once, however many arrays are laid out on it
        args, kwargs = decode_call(encoded)
    assert (args, kwargs) == ((weights,), {"batch": batch})
    with pytest.raises(MissingDevices, match="its mesh is made of 16 devices"):
        decode_call(encoded)
    report = tmp_path / "report.json"
    write_report_file(str(report), [], "tpu", {}, topology=tpu_pod.topology)
    assert read_report_file(str(report)).topology == tpu_pod.topology


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--topology", "v5e-300"], "--topology: v5e-300 is not a power of two chips"),
        (["--topology", "v5e-256", "--target", "gpu"], "--topology names a TPU pod: it checks for --target tpu"),
        (["--num-slices", "2"], "--num-slices is the number of slices of a --topology"),
    ],
)
def test_a_pod_it_cannot_check_is_refused_before_the_program_runs(tmp_path: Path, args, said):
    (tmp_path / "pod.py").write_text("print('never run')\n")
    refused = offload_fixer("run", *args, "pod.py", cwd=tmp_path)
    assert refused.returncode == ExitCode.USAGE, refused.stderr
    assert said in refused.stderr and "never run" not in refused.stdout


DISTRIBUTED_PROGRAM = """\
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


@jax.jit
def step(moments, grads):
    return moments * 0.9, jnp.sum(moments**2) + grads.sum()


def main():
    jax.distributed.initialize(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    mesh = Mesh(np.array(jax.devices()), ("data",))
    on_host = NamedSharding(mesh, P(), memory_kind="pinned_host")
    step.lower(
        jax.ShapeDtypeStruct((8,), jnp.float32, sharding=on_host),
        jax.ShapeDtypeStruct((8,), jnp.float32, sharding=NamedSharding(mesh, P())),
    )
    print("process", jax.process_index(), "of", jax.process_count(), "lowered over", mesh.size, "devices")


if __name__ == "__main__":
    main()
"""
"""One step lowered over the devices of every process: the moments stay in host memory and
their norm is computed there and returned as a device output (error 1200)."""


@needs_host_memory
def test_each_process_of_a_distributed_program_is_checked_and_process_0_reports_and_fixes_once(tmp_path: Path):
    program = tmp_path / "train.py"
    program.write_text(DISTRIBUTED_PROGRAM)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        coordinator = f"127.0.0.1:{free.getsockname()[1]}"
    runs = [
        subprocess.Popen(
            [*command(), "run", "--fix", "--strategy", "device", "train.py", coordinator, "2", str(process)],
            cwd=tmp_path,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for process in range(2)
    ]
    (out0, err0), (out1, err1) = (run.communicate(timeout=600) for run in runs)
    err0, err1 = without_plugin_noise(err0), without_plugin_noise(err1)
    assert "process 0 of 2 lowered over 2 devices" in out0 and "process 1 of 2" in out1
    assert "checked 1 distinct compilation (2 jit calls intercepted in 2 processes) for tpu" in err0
    assert "Found 2 problems (2 fixed, 0 remaining)." in out0, out0 + err0
    assert runs[0].returncode == ExitCode.CLEAN, err0
    # the other process found the same, left the report and the fix to process 0, and wrote nothing
    assert "offload-fixer: process 1 of 2: 1 compilation checked for tpu; process 0 reports" in err1
    assert out1.count("offload-fixer") == 0 and "OFL1200" not in err1
    assert runs[1].returncode == ExitCode.FINDINGS, err1
    fixed = program.read_text()
    assert fixed != DISTRIBUTED_PROGRAM and fixed.count("device_put") == 1, fixed  # written once
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".") and p.is_file()] == []
