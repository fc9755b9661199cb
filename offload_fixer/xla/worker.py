"""The oracle's compiler process: compiles StableHLO with a released XLA compiler, deviceless.

Started by :mod:`offload_fixer.xla.oracle` as ``python -m offload_fixer.xla.worker --target tpu``
(or ``gpu``), it speaks JSON lines: one request ``{"module": <StableHLO text>, "options": {<XLA flag>:
<value>}}`` per line on stdin, one answer per line on the original stdout. Why a process of its own:

* libtpu and the CUDA plugin must be configured before JAX is imported (``JAX_PLATFORMS``,
  log flags), which a user's program or the test process has long done its own way;
* their logs are the only place XLA's host-offloader warnings and instruction traces appear
  (libtpu writes them to files in ``--log_dir``, the CUDA plugin to stderr), so the worker
  owns its file descriptors 1 and 2 and reads back what each compile logged;
* a compiler that aborts takes down this process, not the caller, which reports the abort.

Only the standard library, JAX, :mod:`offload_fixer.jax_compat` and the model's targets are imported here.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, TextIO

from offload_fixer.model import HOST_KINDS, TARGETS

TPU_TOPOLOGIES = (("v5e:2x2", 4), ("v5e:4x4", 16))
"""Compile-only TPU topologies by size; a single chip (``v5e:1x1``) is refused by libtpu."""
HOST_OFFLOADER_LOG = "host_offloader"
STDERR_LOG = "stderr.log"
TPU_LOG_PATTERN = "*.INFO.*"
XLA_ERRORS = ("JaxRuntimeError", "XlaRuntimeError")
"""How XLA's status errors reach Python (``XlaRuntimeError`` before JAX 0.4.36)."""


def configure_environment(target: str, log_dir: str) -> None:
    """What the compilers read at start-up: run JAX on the CPU, log the host offloader."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["TPU_SKIP_MDS_QUERY"] = "1"
    os.environ["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    os.environ["TF_CPP_VMODULE"] = f"{HOST_OFFLOADER_LOG}=1"
    if target == "tpu":
        flags = f"--vmodule={HOST_OFFLOADER_LOG}=1 --log_dir={log_dir} --logbuflevel=-1"
        os.environ["LIBTPU_INIT_ARGS"] = (os.environ.get("LIBTPU_INIT_ARGS", "") + " " + flags).strip()


class LogTail:
    """What was appended to a set of log files since the last read."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns
        self.offsets: dict[str, int] = {}
        self.read()

    def settle(self, quiet_s: float = 0.02, limit_s: float = 0.3) -> None:
        """Wait until the files stop growing: libtpu's logging threads may still be writing a
        compile's warnings when the compile call returns."""
        import time

        deadline = time.monotonic() + limit_s
        size = self._size()
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = self._size()
            if now == size:
                return
            size = now

    def _size(self) -> int:
        total = 0
        for pattern in self.patterns:
            for path in glob.glob(pattern):
                try:
                    total += os.path.getsize(path)
                except OSError:
                    pass
        return total

    def read(self) -> str:
        chunks = []
        for pattern in self.patterns:
            for path in sorted(glob.glob(pattern)):
                try:
                    with open(path, "rb") as handle:
                        handle.seek(self.offsets.get(path, 0))
                        data = handle.read()
                except OSError:
                    continue
                self.offsets[path] = self.offsets.get(path, 0) + len(data)
                chunks.append(data.decode("utf-8", "replace"))
        return "".join(chunks)


@dataclass(frozen=True)
class PodLayout:
    """A TPU pod to compile for (``run --topology``), as libtpu names it."""

    name: str
    """``v5e:16x16``."""
    num_slices: int = 1
    chip_config: str | None = None


class Compiler:
    def __init__(self, target: str, target_config: str | None, pod: PodLayout | None = None) -> None:
        from offload_fixer import jax_compat

        self.compat = jax_compat
        self.target = target
        self.target_config = target_config
        self._devices: dict[int, list[Any]] = {}
        self.pod = pod
        if pod is not None:
            devices = jax_compat.compile_only_devices(
                "tpu", pod.name, num_slices=pod.num_slices, chip_config=pod.chip_config
            )
            self._devices[len(devices)] = devices
        self.devices_for(1)

    def devices_for(self, count: int) -> list[Any]:
        for size, devices in sorted(self._devices.items()):
            if size >= count:
                return devices
        if self.pod is not None:
            raise ValueError(
                f"the module is partitioned over {count} devices, more than {self.pod.name}'s {max(self._devices)}"
            )
        if self.target == "tpu":
            for name, size in TPU_TOPOLOGIES:
                if size >= count:
                    self._devices[size] = self.compat.compile_only_devices("tpu", name)
                    return self._devices[size]
            raise ValueError(f"no compile-only TPU topology with {count} chips is configured")
        self._devices[count] = self.compat.compile_only_devices("cuda", f"1x1x{count}", self.target_config)
        return self._devices[count]

    def compile(self, text: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        module = self.compat.parse_stablehlo(text)
        attrs = module.operation.attributes
        replicas = _int_attr(attrs, "mhlo.num_replicas")
        partitions = _int_attr(attrs, "mhlo.num_partitions")
        devices = self.devices_for(replicas * partitions)
        try:
            executable = self.compat.compile_stablehlo(module, devices, replicas, partitions, options)
        except Exception as exc:
            if type(exc).__name__ not in XLA_ERRORS:
                raise
            return {"outcome": "rejected", "message": str(exc)}
        kinds = self.compat.output_memory_kinds(executable)
        memory = self.compat.memory_figures(executable)
        if memory is not None:
            memory["host_buffers"] = host_buffers(module, kinds)
        return {"outcome": "compiled", "output_memory_kinds": kinds, "memory": memory}


def host_buffers(module: Any, output_kinds: list[str]) -> int:
    """The compiled ``module``'s entry arguments and outputs in host memory (the arguments as
    the module declares them, the outputs as the compiler placed them): each is a copy between
    host and device that the compiler stages in HBM (``model.HOST_BUFFER_STAGING``)."""
    from offload_fixer.ir.module import load

    arguments = sum(argument.memory_kind in HOST_KINDS for argument in load(module).args)
    return arguments + sum(kind in HOST_KINDS for kind in output_kinds)


def _int_attr(attrs: Any, name: str) -> int:
    from jaxlib.mlir import ir

    return ir.IntegerAttr(attrs[name]).value if name in attrs else 1


def serve(
    target: str,
    target_config_path: str | None,
    requests: TextIO,
    answers: TextIO,
    log_dir: str,
    pod: PodLayout | None = None,
) -> None:
    patterns = [os.path.join(log_dir, TPU_LOG_PATTERN)] if target == "tpu" else []
    patterns.append(os.path.join(log_dir, STDERR_LOG))
    target_config = None
    if target == "gpu":
        with open(target_config_path or _default_target_config(), encoding="utf-8") as handle:
            target_config = handle.read()
    try:
        compiler = Compiler(target, target_config, pod)
    except Exception as exc:  # noqa: BLE001 - a compiler that cannot start is the answer, in its words
        _answer(answers, {"ready": False, "message": f"{type(exc).__name__}: {exc}"})
        return
    logs = LogTail(patterns)
    from offload_fixer.xla import compilers

    _answer(
        answers,
        {"ready": True, "jax": compiler.compat.installed_version(), "compiler": str(compilers.installed(target))},
    )
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        logs.read()  # whatever an earlier compile logged late belongs to no answer now
        try:
            answer = compiler.compile(request["module"], request.get("options"))
        except Exception as exc:  # noqa: BLE001 - a module the compiler's MLIR cannot read, a topology too small
            answer = {"outcome": "unsupported", "message": f"{type(exc).__name__}: {exc}"}
        logs.settle()
        answer["log"] = "".join(text for text in logs.read().splitlines(keepends=True) if HOST_OFFLOADER_LOG in text)
        _answer(answers, answer)


def _default_target_config() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets", "h200.txtpb")


def _answer(stream: TextIO, payload: dict[str, Any]) -> None:
    stream.write(json.dumps(payload) + "\n")
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offload_fixer.xla.worker")
    parser.add_argument("--target", choices=TARGETS, required=True)
    parser.add_argument(
        "--log-dir", required=True, help="where the compilers' logs go (the caller reads an abort there)"
    )
    parser.add_argument("--gpu-target-config", default=None)
    parser.add_argument(
        "--topology", default=None, help="a TPU topology to compile for, as libtpu names it (v5e:16x16)"
    )
    parser.add_argument("--num-slices", type=int, default=1)
    parser.add_argument("--chip-config", default=None, help="libtpu's chip_config_name (megacore)")
    args = parser.parse_args(argv)
    pod = PodLayout(args.topology, args.num_slices, args.chip_config) if args.topology else None
    configure_environment(args.target, args.log_dir)
    # The protocol keeps the original stdout; everything the compilers print goes to a file.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    log_fd = os.open(os.path.join(args.log_dir, STDERR_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = sys.stderr = os.fdopen(os.dup(log_fd), "w", buffering=1)
    try:
        serve(args.target, args.gpu_target_config, sys.stdin, answers, args.log_dir, pod)
    except Exception:  # noqa: BLE001 - the worker's last word: whatever ended it goes to the parent
        _answer(answers, {"ready": False, "message": traceback.format_exc()})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
