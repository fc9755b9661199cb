"""The diagnostic codes and memory-kind names are spelled once: in the registries, nowhere else."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import offload_fixer
from offload_fixer import codes, xla_messages
from offload_fixer.model import HOST_KINDS, TPU_HBM
from offload_fixer.rules import ToolMessage, all_rules, backend_codes, xla_texts

PACKAGE = Path(offload_fixer.__file__).parent
CODE = re.compile(r"OFL\d{4}")


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module that is not a docstring, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # A string on its own line after an assignment documents it (attribute docstrings).
    docstrings |= {
        id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_no_module_but_the_registry_spells_a_code(path):
    if path == PACKAGE / "codes.py":
        return
    spelled = [(line, text) for line, text in _strings(path) if CODE.fullmatch(text)]
    assert not spelled, f"use offload_fixer.codes' constants: {spelled}"


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_no_module_but_the_model_spells_a_memory_kind(path):
    if path == PACKAGE / "model.py":
        return
    spelled = [(line, text) for line, text in _strings(path) if text in HOST_KINDS | {TPU_HBM}]
    assert not spelled, f"use offload_fixer.model's memory kinds: {spelled}"


def test_every_code_has_one_rule_page_in_code_order():
    assert tuple(rule.code for rule in all_rules()) == codes.ALL_CODES
    assert [rule.name for rule in all_rules()] == list(codes.NAMES.values())
    assert set(codes.ALL_CODES) >= codes.STATIC_CODES
    assert set(codes.HOST_COMPUTE_WARNING_CODES) <= set(codes.HOST_COMPUTE_CODES) <= set(codes.ALL_CODES)


def test_every_message_names_a_registered_code():
    modules = [importlib.import_module(f"offload_fixer.rules.{code.lower()}") for code in codes.ALL_CODES]
    tool_messages = [value for module in modules for value in vars(module).values() if isinstance(value, ToolMessage)]
    assert len(tool_messages) >= 5
    for message in tool_messages:
        assert message.code in codes.ALL_CODES, message
    for message in (*xla_messages.HOST_OFFLOADER_MESSAGES, *xla_texts()):
        assert message.code is None or message.code in codes.ALL_CODES, message.kind


def test_every_text_a_rule_words_is_its_own_or_the_host_offloaders():
    """A rule's ``failure_texts`` are XLA's texts of its own code (declared in its module, or
    the host offloader's in ``xla_messages``), and no two texts share a kind."""
    for rule in all_rules():
        for message in rule.failure_texts:
            assert message.code == rule.code, (rule.code, message.kind)
    kinds = [message.kind for message in {*xla_messages.HOST_OFFLOADER_MESSAGES, *xla_texts()}]
    assert len(set(kinds)) == len(kinds)


def test_a_text_several_rules_share_names_every_code_of_it():
    # libtpu 0.0.42.1's and 0.0.50.1's wordings of the async-start shape check: OFL1207 (host
    # compute in a differentiated loop) and OFL1212 (a host stack of an inner loop) both fail with it.
    old = (
        "INTERNAL: during context [post-optimization]: The async-start expects the shape of operand 0 to "
        "match the async shape at index {0} (f32[32,16]{0,1:T(8,128)} vs f32[32,16]{0,1:T(8,128)S(5)})."
    )
    new = "INTERNAL: host-call.3 (opcode: async-start) expects the shape of operand 0 to match the async shape"
    both = {codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE, codes.HOST_STACK_OF_INNER_LOOP}
    assert backend_codes(old) == both
    assert backend_codes(new) == both
    assert backend_codes("INVALID_ARGUMENT: something else") == frozenset()
