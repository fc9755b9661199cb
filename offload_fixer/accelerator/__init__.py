"""``run`` where the local backend is the accelerator: every failing compilation found in one run.

On a TPU VM the program's own compile is XLA's: the first compilation that XLA rejects ends
the program with JAX's traceback, and nothing after it is checked. Here each compilation (a
jit's first call of a signature, an AOT ``.compile()``, an eager operation on a host array) is
lowered and analysed before it compiles (:mod:`offload_fixer.interception`), then compiled as
the program compiles it. Where that fails with a host-offload error the compiler's words are
recorded in place of the traceback, and the program goes on with that compilation patched:
the same program without its offload (every host memory kind made device memory; arguments
moved to device before each call, results moved back to the memory kinds the program
declares). What the program computes is unchanged; where its data lives and how fast it runs
are not, and every note says so. ``--no-keep-going`` stops at the first failure instead. A
compilation the analysis predicts the compiler aborts on is never compiled (an abort would
end the program, and nothing can catch it).

Tests and CI have no accelerator: ``OFFLOAD_FIXER_EMULATE_ACCELERATOR=tpu`` takes this path on
the CPU, where each compilation's lowering for the target is first compiled by the released
compiler (compile-only, :mod:`offload_fixer.xla`) and its rejection raised as the chip raises
it (``jax.errors.JaxRuntimeError``, the compiler's own text); the program's CPU compile runs
only where that one compiled. Its transcripts are compared with the chip's in ``tests/``.
"""

from offload_fixer.accelerator.guard import (
    EMULATE_ENV,
    Accelerator,
    AcceleratorRun,
    Compilation,
    Failure,
    StepFigures,
    StopProgram,
    detect,
    program_traceback,
)
from offload_fixer.accelerator.patched import Patched
from offload_fixer.accelerator.stand_ins import AcceleratedLowered, Route

__all__ = [
    "EMULATE_ENV",
    "AcceleratedLowered",
    "Accelerator",
    "AcceleratorRun",
    "Compilation",
    "Failure",
    "Patched",
    "Route",
    "StepFigures",
    "StopProgram",
    "detect",
    "program_traceback",
]
