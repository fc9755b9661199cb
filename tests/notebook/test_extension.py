"""``%load_ext offload_fixer`` in a real kernel (nbclient + ipykernel), as a notebook runs it:
the finding shows under the cell that compiled, ``%offload_fix`` hands Jupyter the fixed cell
(a ``set_next_input`` payload, applied here as Jupyter applies it), and running that cell
and the call again shows nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from offload_fixer import jax_compat

from ..readme_transcripts import transcript

pytestmark = [
    pytest.mark.slow,
    pytest.mark.jax_dependent,  # the kernel runs the cells under the installed JAX
    pytest.mark.skipif(
        not jax_compat.host_memory_on_this_backend(),
        reason="this JAX's CPU build has no pinned_host memory for the cells to use",
    ),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "momentum_offload_notebook.ipynb"
STEP_CELL, TRAIN_CELL = 7, 9
"""Positions (0-based) of the step's and the training loop's cells in the example."""
SETUP = (
    "import jax\nimport numpy as np\nfrom jax.sharding import SingleDeviceSharding\n"
    'host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")'
)
SCALE = "def scale(x):\n    return x * 2"
JIT = "scale_on_host = jax.jit(scale, in_shardings=host)"
CALL = "print(scale_on_host(np.arange(4, dtype=np.float32)))"
TYPED_JAX = jax_compat.regime() is jax_compat.Regime.TYPED


class Kernel:
    """A notebook executed cell by cell in one ipykernel, keeping each execute_reply."""

    def __init__(self, notebook: nbformat.NotebookNode) -> None:
        self.notebook = notebook
        self.replies: dict[int, dict] = {}
        self.client = NotebookClient(self.notebook, kernel_name="python3", timeout=300, on_cell_executed=self._executed)

    @classmethod
    def of(cls, cells: list[str]) -> Kernel:
        return cls(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]))

    def _executed(self, cell, cell_index, execute_reply):
        self.replies[cell_index] = execute_reply

    def run(self, index: int) -> str:
        cell = self.notebook.cells[index]
        self.client.execute_cell(cell, index)
        return "".join(_text(output) for output in _joined_streams(cell.outputs))

    def append(self, source: str) -> int:
        self.notebook.cells.append(nbformat.v4.new_code_cell(source))
        return len(self.notebook.cells) - 1

    def apply_payloads(self, index: int) -> None:
        """What Jupyter does with a ``set_next_input`` payload whose ``replace`` is true: the
        text replaces the cell that ran."""
        for payload in self.replies[index]["content"].get("payload", []):
            if payload["source"] == "set_next_input" and payload.get("replace"):
                self.notebook.cells[index].source = payload["text"]


def _joined_streams(outputs: list) -> list:
    """Consecutive outputs of one stream as one, as Jupyter shows them. ipykernel sends a stream
    in chunks cut wherever its flush timer falls, even inside a ``print`` (between its text and
    its newline), so a chunk is not a line: read apart, such a cut showed as a stray empty line."""
    joined: list = []
    for output in outputs:
        last = joined[-1] if joined else None
        if (
            output.output_type == "stream"
            and last is not None
            and last.output_type == "stream"
            and last.name == output.name
        ):
            joined[-1] = nbformat.from_dict({**last, "text": last.text + output.text})
            continue
        joined.append(output)
    return joined


def _text(output) -> str:
    """An output as a console shows it, one after the other, each ending its line."""
    if output.output_type == "stream":
        text = output.text
    elif output.output_type == "error":
        text = "\n".join(output.traceback)
    else:
        text = output.get("data", {}).get("text/plain", "")
    return text if not text or text.endswith("\n") else text + "\n"


def _example() -> nbformat.NotebookNode:
    return nbformat.read(EXAMPLE, as_version=4)


def _run_all(kernel: Kernel) -> dict[int, str]:
    return {i: kernel.run(i) for i, cell in enumerate(kernel.notebook.cells) if cell.cell_type == "code"}


def test_example_finding_under_its_cell_then_fix_and_rerun_leaves_none():
    kernel = Kernel(_example())
    with kernel.client.setup_kernel():
        outputs = _run_all(kernel)
        assert outputs[1] == "offload-fixer: checking new jit compilations for tpu\n"
        shown = outputs[TRAIN_CELL]
        if TYPED_JAX:  # the README shows the pinned JAX's output
            assert shown == transcript(f"kernel examples/{EXAMPLE.name}").output
        assert "step  29  loss 0.2538" in shown and "velocity lives in: pinned_host" in shown
        # the training cell (In [6]) compiled; the error is in the step's cell, In [5]
        assert "In [5]:10:5: OFL1200 [*] [error]" in shown
        assert "--- a/In [5]\n+++ b/In [5]\n" in shown
        # only the moments are moved, where the step reads them
        (moved,) = re.findall(
            r'^\+(    velocity = jax\.device_put\(opt_state\["velocity"\], .+\))$', shown, re.MULTILINE
        )

        wrong = kernel.append("%offload_fix 3")
        assert "does not edit In [3]; it edits In [5]" in kernel.run(wrong)
        fix = kernel.append("%offload_fix")
        assert "this cell now holds In [5] with the fix" in kernel.run(fix)
        kernel.apply_payloads(fix)
        fixed = kernel.notebook.cells[fix].source
        read = '    velocity = jax.tree.map(lambda v, g: MOMENTUM * v + g, opt_state["velocity"], grads)'
        assert fixed == kernel.notebook.cells[STEP_CELL].source.replace(
            read, f"{moved}\n" + read.replace('opt_state["velocity"]', "velocity")
        )
        assert kernel.run(fix) == ""
        again = kernel.run(kernel.append(kernel.notebook.cells[TRAIN_CELL].source))
        assert (
            again
            == "".join(line for line in shown.splitlines(keepends=True) if line.startswith(("step", "velocity")))
            + "All checks passed! (1 compilation checked for tpu)\n"
        )  # checked, and clean: said so


def test_the_extension_never_changes_what_the_cells_compute():
    without = _example()
    without.cells[1].source = "# offload-fixer not loaded"
    plain = Kernel(without)
    with plain.client.setup_kernel():
        expected = _run_all(plain)[TRAIN_CELL]
    checked = Kernel(_example())
    with checked.client.setup_kernel():
        found = _run_all(checked)[TRAIN_CELL]
    assert found.startswith(expected) and "OFL1200" in found[len(expected) :]


def test_ipython_input_cells_of_a_terminal_shell_map_back_too():
    """IPython itself (not ipykernel) names cells ``<ipython-input-N-hash>``; the magics refuse
    bad options with a one-line message, and unloading gives ``jax.jit`` back."""
    script = textwrap.dedent(f"""
        import jax
        from IPython.core.interactiveshell import InteractiveShell
        real_jit = jax.jit
        shell = InteractiveShell.instance()
        for cell in {["%load_ext offload_fixer", SETUP, SCALE, JIT, CALL, "%offload_fix"]!r}:
            shell.run_cell(cell, store_history=True)
        for number in (3, 4):
            shell.run_cell(f"%offload_fix {{number}}", store_history=True)
            print(f"NEXT INPUT {{number}}:", shell.rl_next_input)
        for line in ["--target nope", "--confirm", "--target gpu --ignore OFL1201"]:
            shell.run_cell("%offload_fixer " + line, store_history=True)
        shell.run_cell("%unload_ext offload_fixer", store_history=True)
        print("RESTORED:", jax.jit is real_jit)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "In [3]:2:12: OFL1201" in output
    # the streamed argument is computed on: moved to device in its function's cell, and the
    # one array it returns (the state it updates) kept host memory at the jit's cell
    assert "the fix edits In [3], In [4]: run %offload_fix N for each" in output
    assert "NEXT INPUT 3: def scale(x):\n    x = jax.device_put(x, " in output
    assert "NEXT INPUT 4: " + JIT.replace("=host)", "=host, out_shardings=host)") in output
    assert "UsageError: %offload_fixer: argument --target: invalid choice: 'nope'" in output
    assert "--confirm (each finding compiled with the real compiler) is not available" in output
    assert "checking new jit compilations for gpu (strategy auto)" in output
    assert "RESTORED: True" in output
    assert "Traceback" not in output
