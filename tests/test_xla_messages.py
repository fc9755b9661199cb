"""``offload_fixer.xla_messages``: a compiler's error said in one line, in the form the TPU says it.

The texts are what a TPU v5e raised (JAX 0.10.2, libtpu 0.0.42.1), as recorded in
``tests/explain_fixtures/tpu_v5e_e1200.log`` and ``tests/accelerator/tpu_v5e_transcripts.json``.
"""

from __future__ import annotations

import json
import re

from offload_fixer.xla_messages import summary
from tests.cli_support import REPO

LOG = (REPO / "tests" / "explain_fixtures" / "tpu_v5e_e1200.log").read_text(encoding="utf-8")
RECORD = json.loads((REPO / "tests" / "accelerator" / "tpu_v5e_transcripts.json").read_text(encoding="utf-8"))


def raised(text: str) -> str:
    """The message of the first ``jax.errors.JaxRuntimeError`` in ``text``, up to the line
    that is the program's again (a traceback's next line, the tool's next note)."""
    start = text.index("jax.errors.JaxRuntimeError: ") + len("jax.errors.JaxRuntimeError: ")
    end = re.search(r"^(offload-fixer:|Traceback)", text[start:], re.M)
    return text[start : start + end.start() if end else None].strip()


def test_error_1200_keeps_its_code_its_name_and_its_page():
    assert summary(raised(LOG)) == (
        "INVALID_ARGUMENT: E1200: CompileTimeHostOffloadOutputLocationMismatch: Tensor which is moved to host "
        "(starting from snapshot.1) is returned from the entry computation but the layout for this output is not "
        "set to host memory. See https://openxla.org/xla/errors/error_1200 for more details."
    )


def test_a_backend_failure_leaves_out_the_instruction_xla_dumps_after_it():
    verbose = next(run for run in RECORD["runs"] if "-v" in run["argv"])
    internal = raised(verbose["stderr"][verbose["stderr"].index("slice (eager)") :])
    assert "%dynamic-slice.1 = " in internal
    assert summary(internal) == (
        "INTERNAL: during context [post-optimization]: Expected instruction to have shape equal to "
        "f32[40,1]{1,0}, actual shape is f32[4,1]{0,1:T(1,128)}"
    )


def test_the_old_form_without_a_code_is_kept_as_it_was():
    old = raised(LOG).replace("E1200: CompileTimeHostOffloadOutputLocationMismatch:\n", "").split("\nSee ")[0]
    assert summary(old) == (
        "INVALID_ARGUMENT: Tensor which is moved to host (starting from snapshot.1) is returned from the entry "
        "computation but the layout for this output is not set to host memory."
    )
