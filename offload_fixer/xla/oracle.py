"""Ask a released XLA compiler what it makes of a module: compiled, or rejected and why.

One worker process per target (:mod:`offload_fixer.xla.worker`), started on first use and kept
for the life of the caller: starting libtpu costs seconds, a compile afterwards milliseconds.
Answers are cached by module text, since the same module is often asked about twice (a test
and its fixed variant, a report and its confirmation).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offload_fixer import codes
from offload_fixer.model import MemoryFigures, XlaVerdict
from offload_fixer.xla import compilers

if TYPE_CHECKING:
    from offload_fixer.topology import Topology

PYTHON_ENV = "OFFLOAD_FIXER_XLA_PYTHON"
"""An interpreter of another environment whose compiler judges (its JAX must read the module)."""
START_TIMEOUT_S = 120.0
COMPILE_TIMEOUT_S = 600.0
WITHOUT_HOST_COMPUTE = {"xla_disable_automatic_host_compute_offload": True}
"""The XLA flag under which a compiler refuses, instead of building, the host compute it would
make (``INVALID_ARGUMENT: Automatic host compute offloading is disabled.``): libtpu 0.0.42.1
and 0.0.50.1, jax-cuda12-plugin 0.10.2 and 0.12.0.1 all honour it per compile. ``--confirm``
judges host-compute findings by it rather than by the warnings XLA logs, whose wording and
destination (stderr, libtpu's log files) differ between builds."""


class CompilerUnavailable(RuntimeError):
    """No released compiler for the target is installed, or it failed to start."""

    def __init__(self, target: str, reason: str, install: list[str] | None = None) -> None:
        self.target = target
        self.reason = reason
        self.install = install
        super().__init__(reason)

    def __str__(self) -> str:
        if self.install:
            return f"{self.reason}; install it with: pip install {' '.join(_quote(r) for r in self.install)}"
        return self.reason


def _quote(requirement: str) -> str:
    return f'"{requirement}"' if any(c in requirement for c in "[]<>=") else requirement


def require_installed(target: str, python: str | None = None) -> None:
    """Raise :class:`CompilerUnavailable`, with the install command, where no compiler for
    ``target`` can be started: this environment has none, or the interpreter of another one
    (``python``, else :data:`PYTHON_ENV`) is not there to run."""
    target = compiler_target(target)
    python = python or os.environ.get(PYTHON_ENV) or sys.executable
    if python != sys.executable:
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise CompilerUnavailable(target, f"cannot start {python}: no such executable")
        return
    if compilers.installed(target) is not None:
        return
    from offload_fixer import jax_compat

    requirements = jax_compat.compiler_requirements(target)
    reason = f"no {target.upper()} compiler is installed ({' or '.join(compilers.PACKAGES[target])})"
    if requirements is None:
        reason += f"; the package registry has none for JAX {jax_compat.installed_version()}"
    raise CompilerUnavailable(target, reason, requirements)


def compiler_target(target: str) -> str:
    """Every GPU analysis target is judged by XLA:GPU."""
    return "tpu" if target == "tpu" else "gpu"


class Oracle:
    """A worker process holding one target's compiler; thread-safe, one compile at a time.

    ``topology``: a TPU pod whose compile-only devices the worker compiles for (``run
    --topology v5e-256``); without one, the smallest of the worker's own topologies that holds
    the module's devices."""

    def __init__(self, target: str, python: str | None = None, topology: Topology | None = None) -> None:
        self.target = compiler_target(target)
        self.topology = topology
        self.python = python or os.environ.get(PYTHON_ENV) or sys.executable
        self._process: subprocess.Popen[str] | None = None
        self._starting: subprocess.Popen[str] | None = None
        self._log_dir: str | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, XlaVerdict] = {}
        self.compiler = ""
        self.jax_version = ""
        self.compiles = 0
        """Modules sent to the compiler (cache hits not counted): what tests count to show a
        program is compiled once."""

    # -- process ------------------------------------------------------------------------
    def spawn(self) -> None:
        """Start the compiler process without waiting for it: its start-up (seconds) then
        overlaps whatever the caller does before its first question. Raises
        :class:`CompilerUnavailable` at once when no compiler is installed."""
        if self._process is not None and self._process.poll() is None:
            return
        if self._starting is not None:
            return
        if self.python == sys.executable:
            require_installed(self.target, self.python)
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self._log_dir = tempfile.mkdtemp(prefix="offload-fixer-xla-")
        command = [self.python, "-m", "offload_fixer.xla.worker", "--target", self.target, "--log-dir", self._log_dir]
        if self.topology is not None:
            command += ["--topology", self.topology.libtpu_name, "--num-slices", str(self.topology.num_slices)]
            if self.topology.generation.chip_config is not None:
                command += ["--chip-config", self.topology.generation.chip_config]
        try:
            self._starting = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                env=env,
            )
        except OSError as exc:
            self._remove_logs()
            raise CompilerUnavailable(self.target, f"cannot start {self.python}: {exc.strerror or exc}") from exc

    def start(self) -> subprocess.Popen[str]:
        """The compiler process, started if it is not running; raises :class:`CompilerUnavailable`."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        self.spawn()
        process, self._starting = self._starting, None
        assert process is not None
        hello = self._read(process, START_TIMEOUT_S)
        if hello is None or not hello.get("ready"):
            process.kill()
            process.wait()
            reason = (
                (hello or {}).get("message")
                or _last_lines(self._log_dir)
                or "the compiler process exited while starting"
            )
            self._remove_logs()
            raise CompilerUnavailable(self.target, f"the {self.target.upper()} compiler did not start: {reason}")
        self.compiler = hello.get("compiler", "")
        self.jax_version = hello.get("jax", "")
        self._process = process
        return process

    @staticmethod
    def _read(process: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
        result: list[str] = []
        stdout = process.stdout
        assert stdout is not None, "the worker is started with stdout=PIPE"
        reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            return None
        return json.loads(result[0])

    def close(self) -> None:
        if self._starting is not None:
            self._starting.kill()
            self._starting.wait()
            self._starting = None
        process, self._process = self._process, None
        if process is not None and process.poll() is None and process.stdin is not None:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._remove_logs()

    def _remove_logs(self) -> None:
        if self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    # -- questions ----------------------------------------------------------------------
    def judge(self, source: Any, options: dict[str, Any] | None = None) -> XlaVerdict:
        """Compile ``source`` (a ``Lowered``, an MLIR module, StableHLO text) and say how it ended.

        Lower for the target first (``lowering_platforms=("tpu",)`` or ``("cuda",)``): the
        compiler judges the module exactly as given, with the XLA flags ``options`` (for this
        compile alone: :data:`WITHOUT_HOST_COMPUTE`).
        """
        text = module_text(source)
        request = {"module": text, **({"options": options} if options else {})}
        key = hashlib.sha256(json.dumps(request, sort_keys=True).encode("utf-8")).hexdigest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
            process = self.start()
            assert process.stdin is not None, "the worker is started with stdin=PIPE"
            self.compiles += 1
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            answer = self._read(process, COMPILE_TIMEOUT_S)
            if answer is None:
                code = process.poll()
                if code is None:
                    process.kill()
                code = process.wait()
                self._process = None
                answer = {"outcome": "aborted", "message": _abort_text(code, _last_lines(self._log_dir))}
                self._remove_logs()
            verdict = _verdict(self.target, self.compiler, answer)
            self._cache[key] = verdict
            return verdict


def _abort_text(returncode: int, last_words: str) -> str:
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
    return f"the compiler process {how} while compiling" + (f": {last_words}" if last_words else "")


ABORT_MARKERS = ("Check failed", "F0000", "RET_CHECK", "Fatal")


def _last_lines(log_dir: str | None) -> str:
    """What a compiler that died said last: the CHECK that failed, if it logged one."""
    if not log_dir:
        return ""
    from offload_fixer.xla.worker import STDERR_LOG, TPU_LOG_PATTERN

    lines: list[str] = []
    for pattern in (TPU_LOG_PATTERN, STDERR_LOG):
        for path in sorted(Path(log_dir).glob(pattern)):
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    fatal = [line.strip() for line in lines if any(marker in line for marker in ABORT_MARKERS)]
    return fatal[-1] if fatal else ""


def module_text(source: Any) -> str:
    """StableHLO text with locations: XLA names instructions after them."""
    if hasattr(source, "compiler_ir"):
        return source.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
    if isinstance(source, str):
        return source
    operation = getattr(source, "operation", None)
    if operation is not None:
        return str(operation.get_asm(enable_debug_info=True))
    if isinstance(source, (bytes, bytearray)):
        from offload_fixer.ir.module import load

        return str(load(bytes(source)).module.operation.get_asm(enable_debug_info=True))
    raise TypeError(f"expected a jax Lowered, an MLIR module or StableHLO text, got {type(source).__name__}")


def verdict_of_error(target: str, compiler: str, message: str, predicted: str | None = None) -> XlaVerdict:
    """The verdict of a compile that raised ``message`` (a program's own compile on the
    accelerator: ``jax.errors.JaxRuntimeError``'s text), read as a worker's rejection is.
    Where XLA's text is that of several rules (libtpu 0.0.50.1's lane-slice refusal: OFL1210,
    OFL1214), the code the analysis ``predicted`` for it, else the lowest: it is still an
    offload failure, not the program's own error."""
    verdict = _verdict(target, compiler, {"outcome": "rejected", "message": message})
    if verdict.code is not None:
        return verdict
    from offload_fixer.rules import backend_codes

    shared = backend_codes(message)
    if not shared:
        return verdict
    return dataclasses.replace(verdict, code=predicted if predicted in shared else min(shared))


def _verdict(target: str, compiler: str, answer: dict[str, Any]) -> XlaVerdict:
    from offload_fixer.explain.messages import parse_error_log

    outcome = answer["outcome"]
    message = answer.get("message", "")
    log = answer.get("log", "")
    # The instruction trace is logged just before the error is raised: read them together.
    found = parse_error_log(log + "\n" + message if outcome in ("rejected", "aborted") else log)
    errors = [e for e in found if e.severity != "warning"]
    warnings = [e for e in found if e.severity == "warning"]
    first = errors[0] if errors else None
    error_id = None
    if first is not None and first.code is not None and first.error_name:
        error_id = f"E{first.code}"
    code = first.diagnostic_code if first else None
    if code is not None and outcome == "aborted" and _shared_check(message):
        code = None
    if first is None and outcome in ("rejected", "aborted"):
        code = _backend_code(message)
    return XlaVerdict(
        target=target,
        compiler=compiler,
        outcome=outcome,
        code=code,
        error=error_id,
        message=message,
        instruction=first.instruction if first else None,
        output_index=first.trace_output_index if first else None,
        trace=tuple(step.instruction for step in first.trace) if first else (),
        output_memory_kinds=tuple(answer.get("output_memory_kinds", ())),
        memory=MemoryFigures(**answer["memory"]) if answer.get("memory") else None,
        host_compute=tuple(
            w.instruction for w in warnings if w.diagnostic_code == codes.DEVICE_COMPUTE_ON_HOST and w.instruction
        ),
        host_slices=tuple(
            w.instruction
            for w in warnings
            if w.diagnostic_code == codes.HOST_SLICE_NOT_MOVED_TO_DEVICE and w.instruction
        ),
    )


def _shared_check(message: str) -> bool:
    """Whether an abort's CHECK is the text of several rules, so that it names no one code (the
    analysis's prediction and ``--confirm`` tell which)."""
    from offload_fixer.rules import rule_codes

    return len(rule_codes(message)) > 1


def _backend_code(message: str) -> str | None:
    """The code of a backend failure the rules know (``OFL1207``...), from XLA's text; ``None``
    where the text is that of several codes (libtpu's ``DMA from hbm to hbm``: OFL1204, OFL1209)."""
    from offload_fixer.rules import backend_codes

    found = backend_codes(message)
    return next(iter(found)) if len(found) == 1 else None


_ORACLES: dict[tuple[str, str | None], Oracle] = {}
_ORACLES_LOCK = threading.Lock()


def oracle(target: str, topology: Topology | None = None) -> Oracle:
    """This process's oracle for ``target`` (on ``topology``'s devices, where given), started
    on first use, closed at exit."""
    key = (compiler_target(target), topology.key() if topology is not None else None)
    with _ORACLES_LOCK:
        if key not in _ORACLES:
            _ORACLES[key] = Oracle(key[0], topology=topology)
        return _ORACLES[key]


def judge(source: Any, target: str) -> XlaVerdict:
    """See :meth:`Oracle.judge`; raises :class:`CompilerUnavailable` without a compiler."""
    return oracle(target).judge(source)


@atexit.register
def _close_all() -> None:
    for worker in list(_ORACLES.values()):
        worker.close()
