"""Every program the repository holds, as modules a compiler can judge: the oracle's corpora.

Each :class:`Program` lowers itself for a target on this CPU machine (``tpu`` or ``cuda``
lowering), the same module the analysis reads and the released compiler compiles. The
fidelity tests (``tests/xla/test_fidelity.py``) and ``scripts/fidelity.py`` both read them
from here, so the figures the script prints are those the tests assert.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import pkgutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
for folder in (TESTS / "analysis", TESTS / "examples", TESTS / "xla"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@dataclass(frozen=True)
class Program:
    corpus: str
    name: str
    lower: Callable[[str], Any]
    """Platform (``tpu``/``cuda``) -> a ``Lowered`` or StableHLO text."""
    skip: Callable[[], str | None] = lambda: None
    """Why the installed JAX cannot build this program, if it cannot."""
    skip_target: Callable[[str], str | None] = lambda target: None
    """Why ``target``'s compiler cannot be given this program (a rule example that is a Pallas
    TPU kernel, for ``gpu``), if it cannot."""

    @property
    def id(self) -> str:
        return f"{self.corpus}/{self.name}"


def _lower(fn: Any, args: tuple[Any, ...], platform: str) -> Any:
    from offload_fixer import jax_compat

    lowered, policies = jax_compat.lower_with_policies(fn, args, {}, platform)
    if policies:
        _POLICIES[id(lowered)] = (lowered, policies)
    return lowered


_POLICIES: dict[int, tuple[Any, tuple[Any, ...]]] = {}


def remat_policies(lowered: Any) -> tuple[Any, ...]:
    """The remat offload policies of the traced program ``lowered`` was lowered from (what
    ``run`` and the API hand the analysis beside the module), read once."""
    entry = _POLICIES.pop(id(lowered), None)
    return entry[1] if entry is not None and entry[0] is lowered else ()


# -- the trigger catalogue -----------------------------------------------------------------
def catalogue() -> Iterator[Program]:
    import catalogue as package
    import jax

    for info in pkgutil.iter_modules(package.__path__):
        for case in importlib.import_module(f"catalogue.{info.name}").CASES:
            yield Program(
                "catalogue",
                case.name,
                lambda platform, case=case: _lower(jax.jit(case.fn, **case.jit()), case.args(), platform),
                lambda case=case: _catalogue_skip(case),
            )


def _catalogue_skip(case: Any) -> str | None:
    import jax

    kinds = {m.kind for m in jax.devices()[0].addressable_memories()}
    missing = [kind for kind in case.needs if kind not in kinds]
    if missing:
        return f"JAX {jax.__version__} on {jax.devices()[0].platform} has no {', '.join(missing)} memory"
    return case.skip_if()


# -- XLA's own test modules ----------------------------------------------------------------
XLA_CASES = TESTS / "analysis" / "xla_cases"


def xla_cases() -> Iterator[Program]:
    for path in sorted(XLA_CASES.glob("*.mlir")):
        yield Program("xla_cases", path.stem, lambda platform, path=path: path.read_text())


# -- the examples, broken and fixed --------------------------------------------------------
EXAMPLES = ROOT / "examples"
_module_names = itertools.count()


def import_program(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"_offload_fixer_corpus_{next(_module_names)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def examples() -> Iterator[Program]:
    from examples_support import ARGUMENTS, SKIP_REASON, jax_runs_examples

    paths = sorted(EXAMPLES.glob("*.py")) + sorted((EXAMPLES / "fixed").glob("*.py"))
    for path in paths:
        example = path.name.split(".")[0]
        label = path.stem if path.parent == EXAMPLES else f"fixed/{path.stem}"
        for function, build_args in ARGUMENTS[example].items():
            yield Program(
                "examples",
                f"{label}:{function}",
                lambda platform, path=path, function=function, build_args=build_args: _lower_example(
                    path, function, build_args, platform
                ),
                lambda: None if jax_runs_examples() else SKIP_REASON,
            )


_example_modules: dict[Path, Any] = {}


def _lower_example(path: Path, function: str, build_args: Callable[[Any], Any], platform: str) -> Any:
    if path not in _example_modules:
        _example_modules[path] = import_program(path)
    module = _example_modules[path]
    return _lower(getattr(module, function), tuple(build_args(module)), platform)


# -- the rule pages' examples --------------------------------------------------------------
def rule_examples() -> Iterator[Program]:
    """Every example of every rule page whose programs a compiler sees: ``OFL1200:invalid``,
    then ``OFL1200:invalid.2``, ..."""
    from offload_fixer.rules import all_rules
    from offload_fixer.rules.examples import not_for

    for rule in all_rules():
        if rule.judged_by_jax:
            continue  # JAX refuses its examples before any compiler sees them
        for kind in ("invalid", "valid"):
            for number in range(len(getattr(rule, kind))):
                name = f"{rule.code}:{kind}" + (f".{number + 1}" if number else "")
                yield Program(
                    "rules",
                    name,
                    lambda platform, rule=rule, kind=kind, number=number: _lower_rule_example(
                        rule, kind, number, platform
                    ),
                    lambda rule=rule, kind=kind, number=number: _rule_example_skip(rule, kind, number),
                    lambda target, rule=rule, kind=kind, number=number: not_for(getattr(rule, kind)[number], target),
                )


def _rule_example_skip(rule: Any, kind: str, number: int) -> str | None:
    """The examples build shardings in host memory on the local device, which JAX's CPU
    backend offers only from 0.7 (earlier ones run on the accelerator they describe)."""
    from offload_fixer import jax_compat

    source = rule.examples(kind)[number]
    if "memory_kind=" in source and not jax_compat.host_memory_on_this_backend():
        return "the example builds a host-memory sharding, which this JAX's CPU backend lacks"
    return None


def _lower_rule_example(rule: Any, kind: str, number: int, platform: str) -> Any:
    source = rule.examples(kind)[number]
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{rule.code} {kind} example>", "exec"), namespace)
    return _lower(namespace["f"], tuple(namespace["args"]), platform)


# -- the probes of the released compilers' behaviour ----------------------------------------
def probes() -> Iterator[Program]:
    import probes as module

    for probe in module.PROBES:
        yield Program(
            "probes",
            probe.name,
            lambda platform, probe=probe: module.lower(probe, platform),
            lambda probe=probe: module.skip_reason(probe),
        )


CORPORA: dict[str, Callable[[], Iterator[Program]]] = {
    "catalogue": catalogue,
    "xla_cases": xla_cases,
    "examples": examples,
    "rules": rule_examples,
    "probes": probes,
}


def programs(names: tuple[str, ...] | None = None) -> list[Program]:
    return [program for name, corpus in CORPORA.items() if names is None or name in names for program in corpus()]


def lowered_alike_without_remat3(program: Program, platform: str, lowered: Any) -> bool:
    """Under JAX's new remat (``jax_remat3``, the CI lane that sets ``JAX_REMAT3=1``): whether
    ``program`` lowers to the same module, locations aside, with the default remat. Then the
    main pass has judged that module already, and the lane compiles only what remat3 changes
    (the programs that differentiate through ``jax.checkpoint``: 15 of 187 under JAX 0.12.0.1).
    False where the flag is off or this JAX has none."""
    import jax

    if not getattr(jax.config, "jax_remat3", False):
        return False
    if isinstance(lowered, str):
        return True  # a module read from text: nothing was traced
    jax.config.update("jax_remat3", False)
    try:
        legacy = program.lower(platform)
    finally:
        jax.config.update("jax_remat3", True)
    return _without_locations(legacy) == _without_locations(lowered)


def _without_locations(lowered: Any) -> str:
    return lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=False)


def unflagged_silent_offload(lowered: Any, report: Any, verdict: Any) -> str | None:
    """A program that moves a value to ``pinned_host`` and compiles with 0 bytes of host
    memory kept nowhere: the offload does nothing, and the analysis must say so (OFL1211). The
    rule is modelled from JAX 0.7.1 (typed memory kinds); under older JAX such a program (a
    ``compute_on`` whose input was moved, on libtpu 0.0.17.1) is a known gap, not checked."""
    from offload_fixer import codes, jax_compat
    from offload_fixer.ir import module as irm
    from offload_fixer.model import PINNED_HOST

    memory = verdict.memory
    if jax_compat.regime() is not jax_compat.Regime.TYPED:
        return None
    if verdict.outcome != "compiled" or memory is None or memory.host_total:
        return None
    if not any(irm.placement(op) == PINNED_HOST for op in irm.load(lowered).placements):
        return None
    if report.by_code(codes.OFFLOAD_DOES_NOTHING):
        return None
    return f"{verdict.compiler} keeps 0 bytes in host memory, the analysis reports no {codes.OFFLOAD_DOES_NOTHING}"
