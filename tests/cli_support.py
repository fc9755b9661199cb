"""Running ``offload-fixer`` the way a user does: the installed entry point next to this
Python (``python -m offload_fixer`` where the package is not installed, as in a bare checkout)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN_NOISE = re.compile(
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR\r?\n"
    r"|^I\d{4} [\d:.]+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be "
    r"used\.\r?\n",
    re.M,
)
"""What JAX's CUDA plugin (installed for the compiler tests) logs whenever JAX is imported on a
machine without a GPU, whatever ``JAX_PLATFORMS`` says: every JAX program prints it there, a
user without the plugin never sees it, and it is not offload-fixer's output."""


RUNS_JAX = frozenset({"run", "fix", "explain", "doctor"})
"""The commands that import JAX (``check``, ``rules`` and ``lsp`` never do: tests/test_cli_imports.py)."""
jax_free_test: str | None = None
"""The ``jax_independent`` test running now (tests/conftest.py), which must not start them."""


def _refuse_jax_in_a_jax_free_test(args: tuple[str, ...]) -> None:
    if jax_free_test is not None and args and args[0] in RUNS_JAX:
        raise AssertionError(
            f"{jax_free_test} runs `offload-fixer {args[0]}`, which imports JAX, but runs only in some environments "
            "(JAX_INDEPENDENT in tests/conftest.py): mark it @pytest.mark.jax_dependent"
        )


def without_plugin_noise(text: str) -> str:
    return PLUGIN_NOISE.sub("", text)


def command() -> list[str]:
    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "offload_fixer"]


def environment(**extra: str) -> dict[str, str]:
    """The test process's environment, the checkout importable, colour off unless asked."""
    env = {key: value for key, value in os.environ.items() if key not in ("FORCE_COLOR", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def offload_fixer(
    *args: str, cwd: Path = REPO, stdin: str | None = None, timeout: float = 600, **env: str
) -> subprocess.CompletedProcess:
    _refuse_jax_in_a_jax_free_test(args)
    proc = subprocess.run(
        [*command(), *args],
        cwd=cwd,
        env=environment(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    proc.stderr = without_plugin_noise(proc.stderr)
    return proc


def in_terminal(
    *args: str,
    cwd: Path = REPO,
    timeout: float = 600,
    columns: int = 100,
    unset: tuple[str, ...] = (),
    raw: bool = False,
    **env: str,
) -> tuple[int, str]:
    """Run ``offload-fixer ARGS`` with stdin, stdout and stderr on a pseudo-terminal, as in an
    interactive shell; returns the exit status and everything the terminal received (``raw``:
    the plugins' noise too). ``unset``: variables of the test's environment the command must
    not see (``JAX_PLATFORMS``, as on a user's machine)."""
    _refuse_jax_in_a_jax_free_test(args)
    import errno
    import fcntl
    import select
    import struct
    import termios
    import time

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen(
        [*command(), *args],
        cwd=cwd,
        env={k: v for k, v in environment(TERM="xterm", **env).items() if k not in unset},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                proc.kill()
                raise TimeoutError(f"offload-fixer {' '.join(args)} still running after {timeout} s")
            ready, _, _ = select.select([master], [], [], min(remaining, 1.0))
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError as exc:  # EIO: every writer closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    screen = b"".join(chunks).decode("utf-8", errors="replace")
    return proc.wait(timeout=60), screen if raw else without_plugin_noise(screen)
