"""``offload-fixer run``: run a user's program unchanged and check every jit compilation it makes.

The program runs in this process on the local backend (CPU is enough) with ``sys.argv`` set and
``__name__ == "__main__"``. The interception of ``jax.jit`` and the checking of each compilation are
:mod:`offload_fixer.interception`; this module runs the program (as ``__main__``, its threads,
its exit, its traceback without the tool's frames) around them.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from offload_fixer.accelerator import StopProgram
from offload_fixer.interception import (
    TOOL_FRAMES,
    CheckedJit,
    CompilationChecker,
    ProgramStop,
    RunResult,
    WouldAbort,
    intercept_jit,
)
from offload_fixer.jax_compat.tracing import jax_roots
from offload_fixer.model import Span

if TYPE_CHECKING:
    from offload_fixer.accelerator import AcceleratorRun
    from offload_fixer.console import Progress
    from offload_fixer.topology import Topology
    from offload_fixer.verdicts import VerdictCache

__all__ = [
    "CheckedJit",
    "CompilationChecker",
    "ProgramNotFound",
    "RunResult",
    "find_program",
    "format_user_traceback",
    "intercept_jit",
    "run_program",
    "stdout_to_stderr",
]


# ---------------------------------------------------------------------------------------
# Running the program
class ProgramNotFound(Exception):
    """The script or module to run does not exist: the CLI exits 4 (an input it cannot read)."""


def find_program(program: str, is_module: bool) -> None:
    """Raise :class:`ProgramNotFound` unless ``program`` can be run, looking for a module
    where ``python -m`` would: the working directory first."""
    if not is_module:
        if not os.path.isfile(program):
            raise ProgramNotFound(f"no such file: {program}")
        return
    saved = sys.path[:]
    try:
        sys.path.insert(0, os.getcwd())
        found = importlib.util.find_spec(program) is not None
    except (ImportError, ValueError) as exc:  # a parent package that fails, or a bad name
        raise ProgramNotFound(f"cannot find module {program!r}: {exc}") from None
    finally:
        sys.path[:] = saved
    if not found:
        raise ProgramNotFound(f"no module named {program!r}")


def run_program(
    program: str,
    argv: Sequence[str] = (),
    target: str = "tpu",
    is_module: bool = False,
    progress: Progress | None = None,
    confirm: bool = False,
    finish: Callable[[RunResult], Any] | None = None,
    show_start_up: bool = False,
    accelerator: AcceleratorRun | None = None,
    topology: Topology | None = None,
    verdicts: VerdictCache | None = None,
) -> RunResult:
    """Run ``program`` (a script path, or a module name with ``is_module``) as ``__main__`` and
    check each distinct jit compilation it triggers for ``target``. ``sys.path`` starts as
    ``python`` sets it: the working directory for a module, the script's directory for a
    script. ``progress`` shows which compilation is being checked.

    ``finish(result)`` is what the caller does with the result (print it, write the report,
    fix); it may end with ``sys.exit``. Given, it also runs where the program ends the process
    before this function could return: the program calls ``os._exit`` (``finish`` then runs
    there, and the process exits with the status ``finish`` gives), or leaves non-daemon
    threads running: Python waits for those before it exits, so their jits are checked too,
    and ``finish`` runs once they are done (``result.deferred`` is then True and the caller
    does nothing more). JAX is started first, without the plugins' start-up noise (all of
    it with ``show_start_up``) and without a TPU probe where there is no accelerator
    (:func:`~offload_fixer.jax_compat.tracing.start_quietly`). ``accelerator``: the local
    backend is the accelerator (or is emulated): each compilation is checked before the
    program compiles it, and one that fails is recorded and patched so that the program goes
    on (:mod:`offload_fixer.accelerator`).

    ``topology``: the program sees that TPU pod's compile-only devices as its own, as process
    0 of the pod (:mod:`offload_fixer.jax_compat.pod`); where it needs the pod's chips to go
    on, it stops there (``result.needs_pod`` says where). Raises
    :class:`~offload_fixer.jax_compat.pod.PodUnavailable` where libtpu cannot build the pod.
    ``verdicts``: the reports earlier runs kept, read and kept by module."""
    from offload_fixer import jax_compat
    from offload_fixer.jax_compat import distributed as jax_distributed
    from offload_fixer.jax_compat import pod as jax_pod
    from offload_fixer.jax_compat import tracing as jax_tracing
    from offload_fixer.processes import share

    jax_compat.check_runtime_supported()
    find_program(program, is_module)
    jax_tracing.start_quietly(verbose=show_start_up)  # jax's own jits are created before the patch, on purpose
    pod = jax_pod.start(topology, verbose=show_start_up) if topology is not None else None

    checker = CompilationChecker(
        target, progress, confirm=confirm, accelerator=accelerator, pod=pod, topology=topology, verdicts=verdicts
    )
    result = checker.result
    state = _ToolState()
    exit_handlers = _ExitHandlers()
    ending = _Ending(checker, finish, exit_handlers, state)
    threads_before = set(threading.enumerate())
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    patch = ExitStack()
    launcher = [os.path.abspath(sys.argv[0])] if os.path.isfile(sys.argv[0]) else []  # the console script
    patch.enter_context(jax_tracing.frames_not_the_users([_PACKAGE, *TOOL_FRAMES, *launcher]))
    patch.enter_context(intercept_jit(checker))
    if pod is not None:
        patch.enter_context(jax_pod.pod_view(pod))
    else:
        patch.enter_context(jax_distributed.shutdown_held())
    patch.enter_context(exit_handlers)
    intercept = checker.intercept_eager if accelerator is not None else None
    observed = patch.enter_context(jax_tracing.observe_compilations(checker.check_eager, intercept))
    if not observed and intercept is not None:  # JAX before 0.10: checked after they run
        observed = patch.enter_context(jax_tracing.observe_compilations(checker.check_eager))
        checker.warn(
            f"eager operations are checked after they run under jax {jax_compat.installed_version()}: "
            "one that fails to compile ends the program"
        )
    if not observed:
        checker.warn(f"eager operations are not checked under jax {jax_compat.installed_version()}")
    try:
        try:
            if is_module:
                sys.argv = [program, *argv]
                sys.path.insert(0, os.getcwd())
                runpy.run_module(program, run_name="__main__", alter_sys=True)
            else:
                path = os.path.abspath(program)
                sys.argv = [program, *argv]
                sys.path.insert(0, os.path.dirname(path))
                runpy.run_path(path, run_name="__main__")
        except StopProgram as exc:  # a failing compilation ended it: said, no traceback
            result.stopped = exc
            result.program_exit_code = 1
        except WouldAbort as exc:  # its next call would have ended the process: said, no traceback
            result.would_abort = _stopped_at(exc)
            result.program_exit_code = 1
        except SystemExit as exc:
            code = exc.code
            if code is None or isinstance(code, int):
                result.program_exit_code = code or 0
            else:
                result.program_exit_code = 1
                result.program_exception = str(code)
        except BaseException as exc:  # noqa: BLE001 - the user's uncaught exception, KeyboardInterrupt included
            result.program_exit_code = 1
            if pod is not None and jax_pod.is_pod_failure(exc):
                result.needs_pod = _stopped_at(exc)
            else:
                result.program_exception = format_user_traceback(exc)
            result.interrupted = isinstance(exc, KeyboardInterrupt)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
        if os.getpid() != ending.pid:  # a child the program forked, leaving it: it exits as Python would
            exit_handlers.run()
            _exit_as_the_program(result)
        if finish is not None and _program_threads(threads_before):
            result.deferred = True
            ending.defer(patch)
            return result
        exit_handlers.run()  # where Python runs them: after the program, its jits checked too
        state.restore()
        if not result.interrupted:
            share(result)  # one process of a jax.distributed program: process 0 reports for all
    finally:
        if not result.deferred:
            ending.close()
            patch.close()
            judge_reports(result, confirm)
    return result


def judge_reports(result: RunResult, confirm: bool) -> None:
    """Each report with what the accelerator made of its compilation, once the program ended."""
    if result.accelerator is not None:
        result.reports = [result.accelerator.judged(report, confirm) for report in result.reports]


def _find_lost_modules() -> None:
    """Put back the modules imported while the program ran that it removed or blocked since,
    found through the modules that still hold them (a package holds its submodules): a fresh
    import would make second copies of their classes."""
    found = True
    while found:
        found = False
        for holder in list(sys.modules.values()):
            for value in list(vars(holder).values()) if isinstance(holder, types.ModuleType) else ():
                name = getattr(value, "__name__", None) if isinstance(value, types.ModuleType) else None
                if isinstance(name, str) and not isinstance(sys.modules.get(name), types.ModuleType):
                    sys.modules[name] = value
                    found = True


def _exit_as_the_program(result: RunResult) -> NoReturn:
    """End a forked child of the program as Python would end it, with none of the run's own
    end (no report, no fix: those are the process that started the run's)."""
    if result.program_exception:
        sys.stderr.write(result.program_exception)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(result.program_exit_code or 0)


class _ExitHandlers:
    """The ``atexit`` handlers the program registers, kept here while it runs and run, last
    first, where Python would run them (after the program and the threads it leaves) but
    before the report: a jit first called from one is checked. JAX's own (a handler of
    ``jax``/``jaxlib``, registered when the program starts the distributed runtime) go to
    ``atexit`` itself: the run still needs JAX after the program."""

    def __init__(self) -> None:
        self.handlers: list[tuple[Callable[..., Any], tuple, dict]] = []

    def __enter__(self) -> _ExitHandlers:
        import atexit

        self.register, self.unregister = atexit.register, atexit.unregister
        atexit.register, atexit.unregister = self._register, self._unregister  # type: ignore[assignment]
        return self

    def __exit__(self, *_exc: object) -> None:
        import atexit

        atexit.register, atexit.unregister = self.register, self.unregister

    def _register(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
        owner = getattr(function, "__module__", None) or type(getattr(function, "__self__", None)).__module__
        if owner.split(".")[0] in ("jax", "jaxlib"):
            return self.register(function, *args, **kwargs)
        self.handlers.append((function, args, kwargs))
        return function

    def _unregister(self, function: Callable[..., Any]) -> None:
        self.handlers = [handler for handler in self.handlers if handler[0] != function]
        self.unregister(function)

    def run(self) -> None:
        while self.handlers:
            function, args, kwargs = self.handlers.pop()
            try:
                function(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - as Python reports a failing handler, and goes on
                print(f"Exception ignored in atexit callback: {function!r}", file=sys.stderr)
                traceback.print_exception(exc)


class _ToolState:
    """What the program may change of the interpreter that the run's own end needs back: the
    modules loaded before it (a program that empties ``sys.modules`` or blocks an import with
    ``None`` would give the tool a second copy of its own classes, or none), the standard
    streams and the working directory (paths are relative to where the run started)."""

    def __init__(self) -> None:
        self.modules = dict(sys.modules)
        self.streams = (sys.stdout, sys.stderr)
        self.cwd = os.getcwd()

    def restore(self) -> None:
        changed = False
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
                changed = True
        if changed or any(module is None for module in sys.modules.values()):
            _find_lost_modules()
        for name in [name for name, module in sys.modules.items() if module is None and name not in self.modules]:
            del sys.modules[name]
        sys.stdout, sys.stderr = self.streams
        try:
            if os.getcwd() != self.cwd:
                os.chdir(self.cwd)
        except OSError:  # the program removed the directory it ran in
            pass


def _program_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Non-daemon threads the program started that still run: Python waits for them."""
    return [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()]


class _Ending:
    """Runs the caller's ``finish`` where the program would end the process first.

    ``os._exit`` is replaced while the program runs (only in this process: a forked child's
    ``os._exit`` is its own). An exit hook registered before the program runs comes last,
    after Python has waited for the program's threads; it runs the program's ``atexit``
    handlers (:class:`_ExitHandlers`) and gives the tool its state back before ``finish``.
    """

    def __init__(
        self,
        checker: CompilationChecker,
        finish: Callable[[RunResult], Any] | None,
        exit_handlers: _ExitHandlers,
        state: _ToolState,
    ) -> None:
        self.checker = checker
        self.finish = finish
        self.exit_handlers = exit_handlers
        self.state = state
        self.pid = os.getpid()
        self.done = False
        self.deferred = False
        self.real_exit = os._exit
        if finish is not None:
            import atexit

            os._exit = self._hard_exit  # type: ignore[assignment]
            atexit.register(self._at_exit)

    def _hard_exit(self, status: int) -> None:
        if os.getpid() != self.pid or self.done:
            self.real_exit(status)
        self.checker.result.program_exit_code = status
        self.state.restore()  # no atexit handler runs after os._exit
        self.real_exit(self._finish())

    def defer(self, patch: Any) -> None:
        """Keep ``jax.jit`` patched (``patch`` is its context, which must not be collected)."""
        self.deferred = True
        self.patch = patch

    def _at_exit(self) -> None:
        if self.deferred and not self.done and os.getpid() == self.pid:
            self.exit_handlers.run()
            self.state.restore()
            self.real_exit(self._finish())

    def close(self) -> None:
        """The program ended normally: the caller finishes; ``os._exit`` is the real one again."""
        if os._exit == self._hard_exit:
            os._exit = self.real_exit
        self.done = True

    def _finish(self) -> int:
        self.done = True
        self.checker.active = False
        judge_reports(self.checker.result, self.checker.confirm)
        status = 0
        try:
            self.finish(self.checker.result)  # type: ignore[misc]
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - the process ends here: say why, as Python would
            traceback.print_exc()
            status = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        return status


_TOOL_FILES = (os.path.abspath(__file__), *TOOL_FRAMES)
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def format_user_traceback(exc: BaseException) -> str:
    """The traceback Python would print, without this runner's and runpy's frames."""
    formatted = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    for part in _chain(formatted):
        kept = [
            frame
            for frame in part.stack
            if frame.filename not in _TOOL_FILES and os.path.abspath(frame.filename) not in _TOOL_FILES
        ]
        part.stack = traceback.StackSummary.from_list(kept)
    return "".join(formatted.format())


def _stopped_at(exc: BaseException) -> ProgramStop:
    """Where the program was stopped: its last frame of its own, and why."""
    user = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and os.path.abspath(frame.filename) not in _TOOL_FILES
        and not os.path.abspath(frame.filename).startswith((_PACKAGE, *jax_roots()))
    ]
    what = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    last = user[-1] if user else None
    column = (getattr(last, "colno", None) or 0) + 1 if last else 1  # ``colno``: Python 3.11 on
    return ProgramStop(what, Span(os.path.abspath(last.filename), last.lineno or 1, column) if last else None)


def _chain(
    formatted: traceback.TracebackException,
) -> Iterator[traceback.TracebackException]:
    seen: set[int] = set()
    pending = [formatted]
    while pending:
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        yield part
        pending.extend(p for p in (part.__cause__, part.__context__) if p is not None)
        pending.extend(getattr(part, "exceptions", None) or ())


# ---------------------------------------------------------------------------------------
# The program's own output
@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what the program prints to stderr, so that stdout carries only the tool's report
    (``run --format json``): ``sys.stdout`` and, where it is a real file, descriptor 1, which
    child processes and C extensions write to."""
    sys.stdout.flush()
    try:
        stdout_fd = sys.stdout.fileno()
        stderr_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests)
        stdout_fd = stderr_fd = None
    saved_fd = os.dup(stdout_fd) if stdout_fd is not None else None
    saved_stdout = sys.stdout
    try:
        if saved_fd is not None and stdout_fd is not None and stderr_fd is not None:
            os.dup2(stderr_fd, stdout_fd)
        sys.stdout = sys.stderr
        yield
    finally:
        sys.stdout = saved_stdout
        sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, stdout_fd)
            os.close(saved_fd)


if __name__ == "__main__":  # ``python -m offload_fixer.runner ARGS`` is ``offload-fixer run ARGS``, nothing else
    from offload_fixer.cli import main

    main(["run", *sys.argv[1:]], prog_name="offload-fixer")
