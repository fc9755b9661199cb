"""Running ``offload-fixer`` the way a user does: the installed entry point next to this
Python (``python -m offload_fixer`` where the package is not installed, as in a bare checkout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def command() -> list[str]:
    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "offload_fixer"]


def environment(**extra: str) -> dict[str, str]:
    """The test process's environment, the checkout importable, colour off unless asked."""
    env = {key: value for key, value in os.environ.items() if key not in ("FORCE_COLOR", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def offload_fixer(*args: str, cwd: Path = REPO, stdin: str | None = None, timeout: float = 600,
                  **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*command(), *args], cwd=cwd, env=environment(**env), input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)
