"""``.pre-commit-hooks.yaml`` used by pre-commit itself, pinned to a release tag, the way the
README tells a user to: from a scratch repository built from this working tree (so the test
does not depend on a tag existing in this clone), installed by pre-commit into its own
environment, run on a project with a broken file, an excluded one and the README's Quick
start programs (both broken ones must stop the commit, the fixed one must pass)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offload_fixer import __version__
from tests.cli_support import REPO

QUICK_START = ("optimizer_offload_broken.py", "param_streaming_broken.py", "optimizer_offload.py")
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
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", readme, re.S)
    assert match, "the README has no .pre-commit-config.yaml block"
    return match.group(1)


def test_the_readme_pins_the_release_tag_and_names_real_hooks():
    config = readme_config()
    assert re.search(rf"^\s+rev: v{re.escape(__version__)}$", config, re.M), config
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    for hook in re.findall(r"- id: (\S+)", config):
        assert f"- id: {hook}\n" in hooks


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


def release_repository(destination: Path) -> str:
    """This working tree as a repository with one commit, tagged as the release; its tag."""
    files = git("ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=REPO).split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git("init", "-q", "-b", "main", cwd=destination)
    git("add", "-A", cwd=destination)
    git("commit", "-q", "-m", "release", cwd=destination)
    tag = f"v{__version__}"
    git("tag", tag, cwd=destination)
    return tag


def test_pre_commit_runs_the_hook_pinned_to_the_tag(tmp_path: Path):
    hooks_repo = tmp_path / "offload-fixer"
    hooks_repo.mkdir()
    tag = release_repository(hooks_repo)
    project = tmp_path / "project"
    (project / "generated").mkdir(parents=True)
    (project / "train.py").write_text(BROKEN)
    (project / "generated" / "model.py").write_text(BROKEN)  # excluded by the project's own settings
    (project / "clean.py").write_text("x = 1\n")
    for name in QUICK_START:
        shutil.copyfile(REPO / "examples" / name, project / name)
    (project / "pyproject.toml").write_text('[tool.offload-fixer]\nextend-exclude = ["generated"]\n')
    config = re.sub(r"repo: .*", f"repo: {hooks_repo}", readme_config())
    assert f"rev: {tag}" in config
    (project / ".pre-commit-config.yaml").write_text(config)
    git("init", "-q", "-b", "main", cwd=project)
    git("add", "-A", cwd=project)
    env = dict(
        os.environ,
        PRE_COMMIT_HOME=str(tmp_path / "cache"),
        PIP_CONSTRAINT=str(REPO / "constraints.txt"),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
    )
    env.pop("PYTHONPATH", None)  # the hook runs from the environment pre-commit builds, not from this checkout

    def pre_commit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PRE_COMMIT, "run", *args], cwd=project, env=env, capture_output=True, text=True, timeout=1200
        )

    caught = pre_commit("--all-files")
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "train.py:9:" in caught.stdout and "OFL1200" in caught.stdout
    for name in QUICK_START[:2]:
        assert f"{name}:" in caught.stdout, caught.stdout
    assert "optimizer_offload.py:" not in caught.stdout  # the Quick start's fixed program
    assert "generated/model.py" not in caught.stdout  # pre-commit named it; --force-exclude skipped it
    assert "Traceback" not in caught.stdout + caught.stderr

    excluded = pre_commit("--files", "generated/model.py", "clean.py")
    assert excluded.returncode == 0, excluded.stdout + excluded.stderr
    assert "Passed" in excluded.stdout
