"""``.pre-commit-hooks.yaml`` used by pre-commit itself, the way the README tells a user to:
its ``.pre-commit-config.yaml`` and its commands, verbatim, with only the repository's URL
replaced by a scratch repository built from this working tree, without tags as a fresh clone
is; installed by pre-commit into its own environment and run on a project with a broken
script, a broken notebook, an excluded file and the README's Quick start programs (the broken
ones must stop the commit, the fixed one must pass)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli_support import REPO

QUICK_START = ("optimizer_offload_broken.py", "param_streaming_broken.py", "optimizer_offload.py")
NOTEBOOK = "momentum_offload_notebook.ipynb"
PRE_COMMIT = shutil.which("pre-commit", path=os.path.dirname(sys.executable))
BROKEN = textwrap.dedent(
    """\
    import functools

    import jax
    from jax.sharding import SingleDeviceSharding

    HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


    @functools.partial(jax.jit, in_shardings=HOST)
    def double(x):
        return x * 2
    """
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PRE_COMMIT is None or shutil.which("git") is None, reason="needs pre-commit and git"),
]


def readme_config() -> str:
    """The ``.pre-commit-config.yaml`` the README shows."""
    match = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", _readme(), re.S)
    assert match, "the README has no .pre-commit-config.yaml block"
    return match.group(1)


def readme_commands() -> list[str]:
    """The commands the README runs after writing the configuration (the block beside it)."""
    section = _readme().split("## pre-commit and CI", 1)[1]
    match = re.search(r"```yaml\n.*?```\n\n```bash\n(.*?)```", section, re.S)
    assert match, "the README's pre-commit section has no commands after its configuration"
    return [line.split("#", 1)[0].strip() for line in match.group(1).splitlines() if line.strip()]


def _readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_the_readme_names_real_hooks_and_no_tag():
    config = readme_config()
    assert re.search(r"^\s+rev: HEAD\b", config, re.M), config  # the repository has no release tags
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    for hook in re.findall(r"- id: (\S+)", config):
        assert f"- id: {hook}\n" in hooks
    assert hooks.count("types_or: [python, pyi, jupyter]") == hooks.count("- id: ")


def git(*args: str, cwd: Path) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
    )
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def fresh_clone(destination: Path) -> None:
    """This working tree as a repository with one commit and no tag, as a fresh clone is."""
    files = git("ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=REPO).split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git("init", "-q", "-b", "main", cwd=destination)
    git("add", "-A", cwd=destination)
    git("commit", "-q", "-m", "offload-fixer", cwd=destination)
    assert git("tag", cwd=destination) == ""


def test_the_readme_snippet_runs_from_a_fresh_clone(tmp_path: Path):
    hooks_repo = tmp_path / "offload-fixer"
    hooks_repo.mkdir()
    fresh_clone(hooks_repo)
    project = tmp_path / "project"
    (project / "generated").mkdir(parents=True)
    (project / "train.py").write_text(BROKEN)
    (project / "generated" / "model.py").write_text(BROKEN)  # excluded by the project's own settings
    (project / "clean.py").write_text("x = 1\n")
    for name in (*QUICK_START, NOTEBOOK):
        shutil.copyfile(REPO / "examples" / name, project / name)
    (project / "pyproject.toml").write_text('[tool.offload-fixer]\nextend-exclude = ["generated"]\n')
    config = readme_config().replace("<URL of this repository>", str(hooks_repo))
    (project / ".pre-commit-config.yaml").write_text(config)
    git("init", "-q", "-b", "main", cwd=project)
    git("add", "-A", cwd=project)
    env = dict(
        os.environ,
        PRE_COMMIT_HOME=str(tmp_path / "cache"),
        PIP_CONSTRAINT=str(REPO / "constraints.txt"),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        PATH=os.pathsep.join([os.path.dirname(PRE_COMMIT), os.environ.get("PATH", "")]),
    )
    env.pop("PYTHONPATH", None)  # the hook runs from the environment pre-commit builds, not from this checkout

    def shell(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(line, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=1200)

    pinned, caught = (shell(line) for line in readme_commands())  # autoupdate, then the run on every file
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    sha = git("rev-parse", "HEAD", cwd=hooks_repo).strip()
    assert f"rev: {sha}" in (project / ".pre-commit-config.yaml").read_text()
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "mutable reference" not in caught.stdout + caught.stderr  # pinned: no warning left
    assert "train.py:9:" in caught.stdout and "OFL1200" in caught.stdout
    assert f"{NOTEBOOK}:cell 8:10:5: OFL1200" in caught.stdout, caught.stdout  # a jupyter file, checked
    for name in QUICK_START[:2]:
        assert f"{name}:" in caught.stdout, caught.stdout
    assert "optimizer_offload.py:" not in caught.stdout  # the Quick start's fixed program
    assert "generated/model.py" not in caught.stdout  # pre-commit named it; --force-exclude skipped it
    assert "Traceback" not in caught.stdout + caught.stderr

    excluded = shell("pre-commit run --files generated/model.py clean.py")
    assert excluded.returncode == 0, excluded.stdout + excluded.stderr
    assert "Passed" in excluded.stdout
