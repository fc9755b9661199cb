"""XLA itself as the judge: the released TPU and GPU compilers, run deviceless.

``judge(lowered, "tpu")`` compiles a module with libtpu (``gpu``: JAX's CUDA plugin) on a
machine without the accelerator and returns an :class:`~offload_fixer.model.XlaVerdict`:
compiled (each output's memory kind) or rejected (XLA's code, message and the instruction it
names), with XLA's host-compute warnings. Nothing heavy is imported until a compiler is asked.
"""

from __future__ import annotations

from offload_fixer.model import XlaVerdict
from offload_fixer.xla.compilers import InstalledCompiler, installed
from offload_fixer.xla.oracle import CompilerUnavailable, Oracle, judge, oracle, require_installed

__all__ = [
    "CompilerUnavailable",
    "InstalledCompiler",
    "Oracle",
    "XlaVerdict",
    "installed",
    "judge",
    "oracle",
    "require_installed",
]
