"""Which released XLA compilers are installed, read from package metadata (nothing imported).

``tpu`` is judged by libtpu (what ``jax[tpu]`` installs), ``gpu`` by JAX's CUDA plugin; both
compile on a machine without the accelerator. A compiler's identity, ``libtpu 0.0.42.1``, is
what the model's corrections and every verdict are keyed by.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

PACKAGES: dict[str, tuple[str, ...]] = {
    "tpu": ("libtpu", "libtpu-nightly"),
    "gpu": ("jax-cuda12-plugin", "jax-cuda13-plugin"),
}
"""The distributions that carry each target's compiler, preferred first."""


@dataclass(frozen=True)
class InstalledCompiler:
    target: str
    package: str
    version: str

    def __str__(self) -> str:
        return f"{self.package} {self.version}"


def installed(target: str) -> InstalledCompiler | None:
    """The compiler for ``target`` in this environment, or ``None``."""
    for package in PACKAGES[_compiler_target(target)]:
        try:
            return InstalledCompiler(_compiler_target(target), package, version(package))
        except PackageNotFoundError:
            continue
    return None


def _compiler_target(target: str) -> str:
    """The analysis targets map onto two compilers: every GPU target is XLA:GPU."""
    return "tpu" if target == "tpu" else "gpu"
