"""Fixes compiled before they are written: the fixed source lowered again and judged by XLA.

``run --fix`` knows each checked compilation's function and its arguments as shapes and
shardings (``report_file.AbstractCall``). The fixed files of the plans are imported as fresh
modules (:func:`.fixed_modules.fixed_modules`: a lone file written beside the original, a package's file from a
temporary copy of the package with every fixed file overlaid, so relative imports resolve inside
the copy) — not as ``__main__``, so a script's ``main()`` does not run — and the function, with
the jit options the fixed source gives it (a jit built inside ``main()``: the recorded options,
the fixed call's shardings evaluated), is lowered for the target with the same arguments and
compiled. A fix is confirmed when XLA compiles the result; one that cannot be lowered so is
``not verified``, with the reason (:class:`Unverifiable`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload_fixer.model import FunctionRef, MemoryFigures, XlaVerdict
from offload_fixer.xla.fixed_modules import Unverifiable, fixed_modules

if TYPE_CHECKING:
    from offload_fixer.topology import Topology


@dataclass(frozen=True)
class FixCheck:
    confirmed: bool
    reason: str
    """Why the fix is refused (or what XLA said when it compiled it: empty)."""
    verdict: XlaVerdict | None = None
    located: bool = True
    """The fixed function was found and imported (else nothing was lowered)."""
    lowered: bool = True
    """The fixed function lowered (a refusal with ``lowered`` is the compiler's)."""
    remaining: tuple[tuple[str, str, str], ...] = ()
    """(code, origin kind, origin argument) of each finding the analysis of the fixed lowering
    still makes: a fix removes only the findings of its root cause that are not among them."""


def compile_fixed(
    texts: Mapping[str, str],
    function: FunctionRef,
    call: Any,
    target: str,
    compile: bool = True,
    host_outputs: Sequence[int] = (),
    require_safe: bool = False,
    no_offload: bool = False,
    topology: Topology | None = None,
) -> FixCheck:
    """Lower ``function`` from the fixed files ``texts`` (path: new contents, every file of
    the plans: the function's module and its jit site's) and, with ``compile``, compile it.
    ``call``: the recorded call (its jitted object ``fun``, where the run has it, its
    ``args``/``kwargs`` as shapes and shardings). Lowering needs JAX only: a fix whose
    ``out_shardings`` does not fit the returned pytree, or whose edit no longer traces, fails
    here. ``host_outputs``: the outputs declared host memory before compiling (those of
    findings this text leaves unfixed, so that XLA judges the rest, as ``--confirm`` does).
    ``require_safe``: a file whose import would run the program is not imported (the check
    says so, ``located`` false). ``no_offload``: every host memory kind of the lowered module
    made device memory before compiling (:func:`~offload_fixer.xla.confirm.without_offload`).
    ``topology``: the pod the run checked for (``--topology``), whose devices it compiles for."""
    from offload_fixer.xla.confirm import with_host_output, without_offload
    from offload_fixer.xla.oracle import module_text, oracle

    texts = {os.path.abspath(p): t for p, t in texts.items()}
    with fixed_modules(texts, require_safe) as load:
        try:
            module = load(function.path or "")
            jitted = find_jitted(module, function)
            if jitted is None and function.jit_path:
                jitted = _jit_at_site(load(function.jit_path), texts, function, module, call)
            if jitted is None:
                raise Unverifiable(f"`{function.name}` is not jitted at module level in the fixed file")
        except Unverifiable as exc:
            return FixCheck(False, f"not verified: {exc}", located=False, lowered=False)
        try:
            lowered = lower_fixed(jitted, module, call.args, call.kwargs, target)
        except Exception as exc:  # noqa: BLE001
            return FixCheck(
                False, f"the fixed `{function.name}` no longer lowers: {type(exc).__name__}: {exc}", lowered=False
            )
    remaining = findings_left(lowered, target, function)
    if not compile:
        return FixCheck(True, "", remaining=remaining)
    text = module_text(lowered)
    for index in dict.fromkeys(host_outputs):
        text = with_host_output(text, index)
    if no_offload:
        text = without_offload(text)
    verdict = oracle(target, topology).judge(text)
    if verdict.outcome == "compiled":
        return FixCheck(True, "", verdict, remaining=remaining)
    from offload_fixer.xla_messages import summary

    said = summary(verdict.message) or verdict.outcome
    return FixCheck(
        False, f"{verdict.compiler} still rejects the fixed `{function.name}`: {said}", verdict, remaining=remaining
    )


def finding_key(diagnostic: Any) -> tuple[str, str, str]:
    """What identifies a finding across the unfixed and the fixed source, whose lines differ:
    its code and its origin (kind, argument)."""
    origin = diagnostic.origin
    return (diagnostic.code, origin.kind if origin else "", (origin.argument or "") if origin else "")


def findings_left(lowered: Any, target: str, function: FunctionRef) -> tuple[tuple[str, str, str], ...]:
    """:func:`finding_key` of each finding the analysis makes of the fixed lowering (empty where
    the module cannot be read: nothing is claimed left)."""
    from offload_fixer.analysis import ModuleReadError, analyze

    try:
        report = analyze(lowered, target, function=function)
    except ModuleReadError:
        return ()
    return tuple(dict.fromkeys(finding_key(d) for d in report.diagnostics))


def original_memory(
    function: FunctionRef,
    call: Any,
    target: str,
    host_outputs: Sequence[int],
    declared: bool = True,
    topology: Topology | None = None,
) -> tuple[MemoryFigures, str] | None:
    """The memory figures of ``function`` as the unfixed files have it, with the outputs
    error 1200 names declared host memory (the program XLA accepts unchanged, as ``--confirm``
    compiles it), and which baseline they are (``model.HOST_OUTPUTS_BASELINE``): what a
    fix's figures are compared with. Where XLA cannot compile that either (libtpu has no
    scatter or update into a host buffer, no loop over a whole host stack, no host result of
    a donated host update: measured on the fix-quality corpus), or ``declared`` is false (the
    run's ``--confirm`` already found it rejected), the same program without its offload
    (``model.NO_OFFLOAD_BASELINE``). ``None`` where neither compiles."""
    from offload_fixer.model import HOST_OUTPUTS_BASELINE, NO_OFFLOAD_BASELINE

    if declared:
        check = compile_fixed({}, function, call, target, host_outputs=host_outputs, topology=topology)
        if check.verdict is not None and check.verdict.memory is not None:
            return check.verdict.memory, HOST_OUTPUTS_BASELINE
        if not check.lowered:
            return None
    check = compile_fixed({}, function, call, target, no_offload=True, topology=topology)
    if check.verdict is not None and check.verdict.memory is not None:
        return check.verdict.memory, NO_OFFLOAD_BASELINE
    return None


def _jit_at_site(site: Any, texts: Mapping[str, str], function: FunctionRef, module: Any, call: Any) -> Any:
    """The jit of ``function`` at its jit site (``function.jit_path``): the site module's own
    module-level jit, else (a jit built inside ``main()``) the fixed function jitted again with
    the options the run recorded, the ``in_shardings``/``out_shardings`` the fixed call spells
    evaluated with the site module's names and the names the original call's ``in_shardings``
    binds to the recorded shardings (``in_shardings=(state_sh, ...)``: ``state_sh``)."""
    import ast

    import jax

    from offload_fixer.api import python_function

    found = find_jitted(site, function)
    if found is not None:
        return found
    where = f"{os.path.basename(function.jit_path or '')}:{function.jit_line}"
    options = dict(call.jit_options) if getattr(call, "jit_options", None) is not None else None
    if options is None:  # a saved report (``fix REPORT``) does not keep them
        raise Unverifiable(f"the jit at {where} is built inside a function, and the record holds no jit options")
    path = os.path.abspath(function.jit_path or "")
    try:
        with open(path, encoding="utf-8") as handle:
            before_text = handle.read()
        original = _jit_call(ast.parse(before_text), function)
        fixed = _jit_call(ast.parse(texts.get(path, before_text)), function)
    except (OSError, SyntaxError):
        fixed = original = None
    if fixed is None or original is None:
        rebuilt = _from_factory(module, function, call, texts.get(path, before_text) == before_text)
        if rebuilt is None:
            raise Unverifiable(f"no `jax.jit({function.name}, ...)` call found at {where}")
        return jax.jit(rebuilt, **options)
    names = dict(vars(site))
    recorded_in = options.get("in_shardings")
    written_in = _keyword(original, "in_shardings", 1)
    if recorded_in is not None and written_in is not None:
        names.update(_bindings(written_in, recorded_in))
    for option, position in (("in_shardings", 1), ("out_shardings", 2)):
        expression = _keyword(fixed, option, position)
        before = _keyword(original, option, position)
        if expression is None or (
            before is not None and ast.dump(before) == ast.dump(expression) and option in options
        ):
            continue
        try:
            options[option] = eval(compile(ast.Expression(expression), path, "eval"), names)
        except Exception as exc:  # noqa: BLE001
            raise Unverifiable(
                f"the jit at {where} is built inside a function; its {option} "
                f"`{ast.unparse(expression)}` needs the running program ({type(exc).__name__}: {exc})"
            ) from None
    fun = python_function(getattr(module, function.name, None))
    if fun is None:
        raise Unverifiable(f"`{function.name}` is not defined at module level in the fixed file")
    return jax.jit(fun, **options)


def _from_factory(module: Any, function: FunctionRef, call: Any, site_unchanged: bool) -> Any:
    """``function`` as the fixed module builds it where the program jits what a factory
    returns (``jax.jit(make_eval_step(config), ...)`` inside ``main()``): the fixed module's
    code of the inner ``def`` with the closure of the function the run jitted (its ``config``),
    where the free variables are the same.
    None where the fix edits the jit site (its options would be the site's, not the record's),
    the run holds no such function, or the fixed code's free variables differ from it."""
    import types

    from offload_fixer.api import python_function

    recorded = python_function(getattr(call, "fun", None))
    code = getattr(recorded, "__code__", None)
    if not site_unchanged or code is None or code.co_name != function.name.rsplit(".", 1)[-1]:
        return None
    if getattr(module, code.co_name, None) is not None:
        return None  # defined at module level: not a factory's (found, or refused, as such)

    def inner(codes: Any, depth: int = 0) -> Any:
        for const in codes:
            if isinstance(const, types.CodeType):
                if const.co_name == code.co_name and const.co_freevars == code.co_freevars:
                    return const
                found = inner(const.co_consts, depth + 1) if depth < 3 else None
                if found is not None:
                    return found
        return None

    makers = [getattr(v, "__code__", None) for v in vars(module).values() if isinstance(v, types.FunctionType)]
    fixed = inner([m for m in makers if m is not None])
    if fixed is None:
        return None
    rebuilt = types.FunctionType(fixed, vars(module), code.co_name, recorded.__defaults__, recorded.__closure__)
    rebuilt.__kwdefaults__ = recorded.__kwdefaults__
    return rebuilt


def _jit_call(tree: Any, function: FunctionRef) -> Any:
    """The ``jax.jit(NAME, ...)`` call of ``function`` nearest its recorded jit line."""
    import ast

    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (ast.unparse(node.func) in ("jax.jit", "jit"))
        and node.args
        and ast.unparse(node.args[0]).split(".")[-1] == function.name
    ]
    return min(calls, key=lambda c: abs(c.lineno - (function.jit_line or 0)), default=None)


def _keyword(call: Any, name: str, position: int) -> Any:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _bindings(expression: Any, value: Any) -> dict[str, Any]:
    """Each name of a tuple/list/dict literal ``expression`` bound to its part of ``value``."""
    import ast

    if isinstance(expression, ast.Name):
        return {expression.id: value}
    found: dict[str, Any] = {}
    if isinstance(expression, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)):
        for part, sub in zip(expression.elts, value):
            found.update(_bindings(part, sub))
    elif isinstance(expression, ast.Dict) and isinstance(value, dict):
        for key, part in zip(expression.keys, expression.values):
            if isinstance(key, ast.Constant) and key.value in value:
                found.update(_bindings(part, value[key.value]))
    return found


def lower_fixed(jitted: Any, module: Any, args: tuple, kwargs: dict, target: str) -> Any:
    """``jitted`` (from the fixed ``module``) lowered for ``target`` with the recorded arguments,
    their dataclass and NamedTuple nodes rebuilt from the fixed module's classes of the same
    name: the recorded ones belong to the original module, whose pytree types JAX compares by
    identity with the ``in_shardings`` the fixed module builds."""
    from offload_fixer import jax_compat

    args, kwargs = rehome((args, kwargs), module)
    return jax_compat.lower_for_platform(jitted, args, kwargs, jax_compat.lowering_platform(target))


def rehome(value: Any, module: Any) -> Any:
    """``value`` with each dataclass or NamedTuple whose class ``module`` also defines (by
    qualified name, a class of another module) rebuilt as an instance of ``module``'s class."""
    kind = type(value)
    own = _same_class(kind, module)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (own or kind)(*(rehome(v, module) for v in value))
    if isinstance(value, (tuple, list)):
        return kind(rehome(v, module) for v in value)
    if isinstance(value, dict):
        return {k: rehome(v, module) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: rehome(getattr(value, f.name), module) for f in dataclasses.fields(value)}
        built: Any = object.__new__(own or kind)
        for name, field_value in changes.items():
            object.__setattr__(built, name, field_value)
        return built
    return value


def _same_class(kind: type, module: Any) -> type | None:
    found: Any = module
    for part in kind.__qualname__.split("."):
        found = getattr(found, part, None)
        if found is None:
            return None
    return found if isinstance(found, type) and found is not kind else None


def find_jitted(module: Any, function: FunctionRef) -> Any:
    """The module's jitted object for ``function``: the name itself when it is jitted there,
    else the module-level jit of a function of that name (``step = jax.jit(train_step, ...)``),
    else such a jit held by a module-level object (``TRAINER.step``)."""
    from offload_fixer.api import is_jitted, python_function

    direct = getattr(module, function.name, None)
    if direct is not None and is_jitted(direct):
        return direct

    def named(value: Any) -> bool:
        return is_jitted(value) and getattr(python_function(value), "__name__", None) == function.name

    values = list(vars(module).values())
    for value in values:
        if named(value):
            return value
    for value in values:  # a module-level object's jitted attribute: ``self.step = jax.jit(self.update)``
        if not isinstance(value, type) and not callable(value) and hasattr(value, "__dict__"):
            for attribute in vars(value).values():
                if named(attribute):
                    return attribute
    return None
