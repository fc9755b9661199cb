"""``--confirm``: each finding of a compilation checked by the released compiler of its target.

XLA stops at its first error and names one tensor. To confirm every output the analysis says
error 1200 reaches, the module is compiled again with each output XLA rejects declared host
memory, until XLA compiles it or fails for another reason: the outputs it rejected on the way
are exactly those that fail, and the last verdict decides the other findings. Where that last
module compiles and the analysis found host compute, it is compiled once more with
``--xla_disable_automatic_host_compute_offload`` (:data:`~offload_fixer.xla.oracle.WITHOUT_HOST_COMPUTE`):
XLA refusing it is XLA's own word that it makes host compute there; its logged warnings only
name the instructions.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.model import DEVICE, PINNED_HOST, Diagnostic, Report, XlaVerdict
from offload_fixer.rules import get_rule, rule_codes
from offload_fixer.xla.agreement import compare
from offload_fixer.xla.oracle import WITHOUT_HOST_COMPUTE, Oracle, module_text, oracle


def confirm(report: Report, source: Any, judge: Oracle | None = None) -> Report:
    """``report`` (the analysis of ``source``) with the compiler's verdict on every finding."""
    judge = judge or oracle(report.target)
    text = module_text(source)
    first = judge.judge(text)
    rejected: dict[int, str] = {}
    verdict = first
    warned = list(first.host_compute + first.host_slices)
    for _ in range(len(report.outputs) + 1):
        index = _error_1200_output(verdict, report)
        if index is None or index in rejected:
            break
        rejected[index] = verdict.message
        text = with_host_output(text, index)
        verdict = judge.judge(text)
        warned += [name for name in verdict.host_compute + verdict.host_slices if name not in warned]
    host_compute = None
    if verdict.outcome == "compiled" and any(d.code in codes.HOST_COMPUTE_WARNING_CODES for d in report.diagnostics):
        host_compute = judge.judge(text, WITHOUT_HOST_COMPUTE)
    diagnostics = tuple(
        replace(_confirmed(d, rejected, verdict, warned, host_compute), confirmed_by=first.compiler)
        for d in report.diagnostics
    )
    return replace(
        report,
        diagnostics=diagnostics,
        xla=first,
        unpredicted=compare(report, first).differences,
        xla_accepted=verdict,
        xla_rejected_outputs=tuple(rejected),
    )


def _error_1200_output(verdict: XlaVerdict, report: Report) -> int | None:
    """The output XLA's error 1200 is about: its trace's end, else the output the analysis
    traced from the instruction XLA names."""
    if verdict.code != codes.HOST_VALUE_DEVICE_OUTPUT:
        return None
    if verdict.output_index is not None:
        return verdict.output_index
    for diagnostic in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT):
        if verdict.instruction and f"starting from {verdict.instruction})" in diagnostic.message:
            return diagnostic.output_index
    return None


def _confirmed(
    diagnostic: Diagnostic,
    rejected: dict[int, str],
    last: XlaVerdict,
    warned: list[str],
    host_compute: XlaVerdict | None,
) -> Diagnostic:
    """``host_compute``: the last module compiled without automatic host compute, where it was."""
    if diagnostic.code == codes.HOST_VALUE_DEVICE_OUTPUT:
        message = rejected.get(diagnostic.output_index) if diagnostic.output_index is not None else None
        if message is None and last.outcome == "aborted":
            # Not confirmed, and not refuted either: the compiler died on a CHECK first, which says so.
            return replace(diagnostic, confirmed=False, xla_message=last.message)
        return replace(diagnostic, confirmed=message is not None, xla_message=message)
    if diagnostic.code in codes.HOST_COMPUTE_WARNING_CODES:
        names = f" in {', '.join(warned[:6])}" + (", ..." if len(warned) > 6 else "") if warned else ""
        if host_compute is not None:  # XLA's refusal under the flag decides; its warnings name the places
            made = host_compute.outcome == "rejected" and bool(
                msg.HOST_COMPUTE_DISABLED.pattern().search(host_compute.message)
            )
            refused = f"makes host compute{names} (refused under --xla_disable_automatic_host_compute_offload)"
            return replace(diagnostic, confirmed=made, xla_message=refused if made else None)
        warns = f"warns of host compute{names}" if warned else None
        return replace(diagnostic, confirmed=bool(warned), xla_message=warns)
    evidence = get_rule(diagnostic.code).compiled_evidence
    if evidence is not None:
        said = evidence(last, diagnostic)
        return replace(diagnostic, confirmed=said is not None, xla_message=said)
    if diagnostic.severity == "error":
        # A text several rules share names no one code: the diagnostic's is one of them.
        same_code = last.code == diagnostic.code or (last.code is None and diagnostic.code in rule_codes(last.message))
        agrees = last.outcome in ("rejected", "aborted") and same_code
        return replace(diagnostic, confirmed=agrees, xla_message=last.message or None)
    return diagnostic


def with_host_output(text: str, index: int) -> str:
    """The module with output ``index`` declared host memory (``pinned_host``)."""
    from jaxlib.mlir import ir

    from offload_fixer.ir.module import make_context, named_attributes

    context = make_context()
    module = ir.Module.parse(text, context=context)
    main = next(op.operation for op in module.body.operations if _symbol(op.operation) == "main")
    attrs = list(ir.ArrayAttr(main.attributes["res_attrs"])) if "res_attrs" in main.attributes else []
    results = len(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)
    attrs += [ir.DictAttr.get({}, context=context)] * (results - len(attrs))
    entries = named_attributes(attrs[index])
    entries["mhlo.memory_kind"] = ir.StringAttr.get(PINNED_HOST, context=context)
    attrs[index] = ir.DictAttr.get(entries, context=context)
    main.attributes["res_attrs"] = ir.ArrayAttr.get(attrs, context=context)
    return str(module.operation.get_asm(enable_debug_info=True))


_HOST_KIND = re.compile(r'\b(mhlo\.memory_kind|_xla_buffer_placement) = "(?:pinned_host|unpinned_host)"')


def without_offload(text: str) -> str:
    """The module with every host memory kind it declares (arguments, outputs, moves) made
    device memory: the same program without its offload, which XLA compiles where even the
    program with its failing outputs declared host is not accepted (libtpu cannot build a
    scatter or an update into a host buffer, a loop over a host stack, a host result of a
    donated update)."""
    return _HOST_KIND.sub(lambda match: f'{match.group(1)} = "{DEVICE}"', text)


def _symbol(op: Any) -> str | None:
    from jaxlib.mlir import ir

    return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
