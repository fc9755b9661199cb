"""Keep README.md true: its transcripts are real output, and its tables come from the code.

Transcripts are the ```` ```console ```` blocks. Each ``$ COMMAND`` line in one is run with
bash in a scratch directory holding a copy of ``examples/`` (``offload-fixer`` and
``.venv/bin/offload-fixer`` are the installed command), stdout and stderr together in the
order a terminal shows them; the lines up to the next ``$`` are its output. Commands run in
the order the README gives them, all in the same scratch directory, so a ``--diff`` then a
``--fix`` show what a user sees when typing them in turn. A block after
``<!-- transcript: kernel NOTEBOOK -->`` has no command: it is what a Jupyter kernel shows
under the cell of NOTEBOOK (in the scratch copy) that reports findings, the notebook run top
to bottom as a user runs it. Generated blocks sit between ``<!-- generated: NAME -->`` and
``<!-- end: NAME -->`` and are written by :data:`GENERATORS`.

    .venv/bin/python scripts/readme.py           # exit 1 and print what differs
    .venv/bin/python scripts/readme.py --update  # rewrite README.md from real output

``tests/test_readme.py`` runs the check. Output depends on the JAX version (messages, traces),
so transcripts are written and compared under the JAX that ``constraints.txt`` pins. Where
JAX's CUDA plugin is installed (the compiler tests install it), what it logs on importing JAX
without a GPU is left out (``tests.cli_support.PLUGIN_NOISE``): a user who follows the Quick
start does not have the plugin, and it is not this tool's output.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the tests' helpers are the checkout's
    sys.path.insert(0, str(ROOT))
from tests.cli_support import without_plugin_noise  # noqa: E402

README = ROOT / "README.md"
CONSOLE_BLOCK = re.compile(r"^(?:<!-- transcript: (?P<name>.+?) -->\n)?```console\n(?P<body>.*?)^```\n", re.S | re.M)
KERNEL = "kernel "
"""A transcript named ``kernel NOTEBOOK`` is a notebook's output in a kernel."""
GENERATED_BLOCK = re.compile(
    r"^<!-- generated: (?P<name>[\w-]+) -->\n(?P<body>.*?)^<!-- end: (?P=name) -->\n", re.S | re.M
)
PROMPT = "$ "


@dataclass(frozen=True)
class Command:
    line: str
    output: str


def parse_console(body: str) -> list[Command]:
    commands: list[Command] = []
    for line in body.splitlines(keepends=True):
        if line.startswith(PROMPT):
            commands.append(Command(line[len(PROMPT) :].rstrip("\n"), ""))
        elif commands:
            commands[-1] = Command(commands[-1].line, commands[-1].output + line)
        else:
            raise ValueError(f"a console block must start with a `$ ` command line, not {line!r}")
    return commands


def pinned_jax() -> str:
    match = re.search(r"^jax==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert match, "constraints.txt pins no jax"
    return match.group(1)


class Scratch:
    """A directory where the README's commands run as if typed at the repository's root."""

    def __init__(self) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix="offload-fixer-readme-")
        self.path = Path(self._directory.name)
        shutil.copytree(ROOT / "examples", self.path / "examples")
        installed = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
        if installed is None:
            raise SystemExit("the offload-fixer entry point is not installed next to this Python")
        (self.path / ".venv" / "bin").mkdir(parents=True)
        (self.path / ".venv" / "bin" / "offload-fixer").symlink_to(installed)

    def environment(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("FORCE_COLOR", "NO_COLOR", "PYTHONPATH", "XLA_FLAGS")
        }
        env.update(
            PATH=os.pathsep.join([str(self.path / ".venv" / "bin"), env.get("PATH", "")]),
            PYTHONUNBUFFERED="1",
            JAX_PLATFORMS="cpu",
            TPU_SKIP_MDS_QUERY="1",
            TERM="dumb",
        )
        return env

    def run(self, line: str) -> str:
        proc = subprocess.run(
            ["bash", "-c", line],
            cwd=self.path,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=900,
        )
        return without_plugin_noise(proc.stdout)

    def kernel_output(self, notebook: str) -> str:
        """What the notebook's one cell with findings shows in a kernel, each output ending
        its line (stdout, then what the extension displays), after running it top to bottom."""
        import nbformat
        from nbclient import NotebookClient

        document = nbformat.read(self.path / notebook, as_version=4)
        client = NotebookClient(
            document, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(self.path)}}
        )
        client.execute(env=self.environment())
        shown = [
            "".join(_output_text(output) for output in cell.get("outputs", ()))
            for cell in document.cells
            if cell.cell_type == "code"
        ]
        with_findings = [text for text in shown if re.search(r": OFL\d{4} ", text)]
        if len(with_findings) != 1:
            raise ValueError(f"{notebook}: {len(with_findings)} cells show findings; a kernel transcript needs one")
        return without_plugin_noise(with_findings[0])

    def close(self) -> None:
        self._directory.cleanup()


def _output_text(output) -> str:
    """A cell output as a console shows it."""
    if output.output_type == "stream":
        text = output.text
    elif output.output_type == "error":
        text = "\n".join(output.traceback)
    else:
        text = output.get("data", {}).get("text/plain", "")
    return text if not text or text.endswith("\n") else text + "\n"


# ---------------------------------------------------------------------------------------
# Generated blocks
def exit_codes_table() -> str:
    from offload_fixer.exit_codes import ExitCode

    rows = [f"| {int(code)} | {code.meaning} |" for code in ExitCode]
    return "\n".join(["| code | meaning |", "|---|---|", *rows]) + "\n"


def diagnostic_codes_table() -> str:
    from offload_fixer.model import TARGETS
    from offload_fixer.rules import all_rules

    header = "| code | " + " | ".join(f"`{t}`" for t in TARGETS) + " | meaning |"
    rows = [
        f"| {rule.code} | " + " | ".join(rule.severity(t) for t in TARGETS) + f" | {rule.summary} |"
        for rule in all_rules()
    ]
    return "\n".join([header, "|---|" + "---|" * len(TARGETS) + "---|", *rows]) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "exit-codes": exit_codes_table,
    "diagnostic-codes": diagnostic_codes_table,
}


# ---------------------------------------------------------------------------------------
def regenerate(text: str) -> str:
    """``text`` (the README) with every transcript and generated block made from real output."""
    return regenerate_transcripts(regenerate_tables(text))


def regenerate_tables(text: str) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise ValueError(f"no generator for the README block {name!r}")
        return f"<!-- generated: {name} -->\n{GENERATORS[name]()}<!-- end: {name} -->\n"

    return GENERATED_BLOCK.sub(generated, text)


def regenerate_transcripts(text: str) -> str:
    scratch = Scratch()
    try:

        def transcript(match: re.Match[str]) -> str:
            name = match["name"]
            label = f"<!-- transcript: {name} -->\n" if name else ""
            if name and name.startswith(KERNEL):
                return f"{label}```console\n{scratch.kernel_output(name[len(KERNEL) :])}```\n"
            lines = [f"{PROMPT}{command.line}\n{scratch.run(command.line)}" for command in parse_console(match["body"])]
            return f"{label}```console\n" + "".join(lines) + "```\n"

        return CONSOLE_BLOCK.sub(transcript, text)
    finally:
        scratch.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite README.md instead of checking it")
    options = parser.parse_args()
    import jax

    if jax.__version__ != pinned_jax():
        raise SystemExit(f"the README's transcripts are made with jax {pinned_jax()}; this is {jax.__version__}")
    current = README.read_text(encoding="utf-8")
    fresh = regenerate(current)
    if options.update:
        README.write_text(fresh, encoding="utf-8")
        return
    if fresh != current:
        sys.stdout.writelines(
            difflib.unified_diff(current.splitlines(True), fresh.splitlines(True), "README.md", "real output")
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()
