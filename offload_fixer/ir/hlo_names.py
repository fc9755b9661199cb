"""The names XLA gives a module's instructions, so a finding reads like the user's TPU log.

XLA names each instruction when it translates the StableHLO module to HLO: after the op's
location (``mul.3`` for JAX's ``jit(f)/mul``, ``params__b__.1`` for the argument
``params['b']``) and a counter per name. The translation is jaxlib's own code, the first step
of every compile, so running it here gives exactly those names. To know which instruction an
operation became, a copy of the module is translated with each operation tagged by a frontend
attribute (``ofl.op``), which XLA carries onto the instruction and which changes no name.
"""

from __future__ import annotations

import re

from jaxlib.mlir import ir

from offload_fixer.ir import module as irm

TAG = "ofl.op"
_TAG_TEXT = re.compile(r'ofl\.op="(\d+)"')
_PARAMETER = re.compile(r"\bparameter\((\d+)\)")


class HloNames:
    """Names of ``view``'s operations, entry parameters and entry root, computed on first use."""

    def __init__(self, view: irm.ModuleView) -> None:
        self.view = view
        self._ops: dict[ir.Operation, str] | None = None
        self._parameters: dict[int, str] = {}
        self._root: str | None = None

    def op(self, op: ir.Operation) -> str | None:
        self._translate()
        return self._ops.get(op) if self._ops is not None else None

    def parameter(self, index: int) -> str | None:
        self._translate()
        return self._parameters.get(index)

    def root(self) -> str | None:
        self._translate()
        return self._root

    def _translate(self) -> None:
        if self._ops is not None:
            return
        self._ops = {}
        tagged = _tagged_copy(self.view.module)
        ops = [op for top in tagged.body.operations for op in irm.walk_operations(top.operation)]
        originals = [op for top in self.view.module.body.operations for op in irm.walk_operations(top.operation)]
        from offload_fixer.jax_compat import mlir as jax_mlir

        try:
            instructions = jax_mlir.hlo_instructions(str(tagged.operation.get_asm(enable_debug_info=True)))
        except Exception:  # noqa: BLE001 - a module XLA's translation rejects: names stay unknown
            return
        for instruction in instructions:
            tag = _TAG_TEXT.search(instruction.text)
            if tag is not None:
                index = int(tag.group(1))
                if index < len(originals) and ops[index].name == originals[index].name:
                    self._ops.setdefault(originals[index], instruction.name)
            if instruction.entry:
                if instruction.opcode == "parameter":
                    parameter = _PARAMETER.search(instruction.text)
                    if parameter is not None:
                        self._parameters[int(parameter.group(1))] = instruction.name
                if instruction.root:
                    self._root = instruction.name


def _tagged_copy(module: ir.Module) -> ir.Module:
    context = module.context
    copy = ir.Module.parse(str(module.operation.get_asm(enable_debug_info=True)), context=context)
    index = 0
    for top in copy.body.operations:
        for op in irm.walk_operations(top.operation):
            entries: dict[str, ir.Attribute] = {}
            if "mhlo.frontend_attributes" in op.attributes:
                entries.update(irm.named_attributes(op.attributes["mhlo.frontend_attributes"]))
            entries[TAG] = ir.StringAttr.get(str(index), context=context)
            op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(entries, context=context)
            index += 1
    return copy
