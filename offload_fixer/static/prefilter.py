"""Cheap tests that rule a file out before libcst parses it (parsing is the dominant cost).

1. Text: the check can only report a host value spelled somewhere it can see, and every
   spelling it models contains ``pinned_host`` (which ``unpinned_host`` contains too, in a
   string, a ``memory_kind`` variable or ``TransferToMemoryKind``) or ``.Host`` as a whole
   attribute (``jax.memory.Space.Host`` through any alias of ``jax.memory`` or ``Space``; not
   ``HostTensors``); a report also needs a jit site, so ``jit``. Broader words
   (``device_put``, ``memory_kind``, ``offload``) would let through files where nothing can
   be decided. The host spelling may be in the file or in a project module it imports
   (:meth:`offload_fixer.static.project.Project.selects`, which reads imports from text).
   A remat offload policy (``save_and_offload_only_these_names``,
   ``offload_dot_with_no_batch_dims``, ``Offloadable``) or ``compute_on`` offloads too, with
   its destination often taken from configuration, so spelling one counts as spelling host
   memory. A file with such a policy and ``unpinned_host`` is analysed even without a jit
   (:func:`checks_policy_alone`): the policy is applied where another module jits it, and
   its destination (OFL1204) is checked where it is written; so is a file that spells a
   policy's offloaded names and ``checkpoint_name`` (a misspelt name, OFL1211).
2. Structure: stdlib ``ast`` (about ten times faster than libcst) checks that some name in the
   file resolves, through its imports, to ``jax.jit``/``pjit``. JAX's own sources mention
   memory kinds often but jit only through private modules, so they stop here.
"""

from __future__ import annotations

import ast
import re

from offload_fixer import jax_compat
from offload_fixer.model import PINNED_HOST, UNPINNED_HOST

from .names import JIT, import_binding

JIT_MARKER = "jit"
_JIT_BYTES = JIT_MARKER.encode()
HOST_MEMBERS = tuple(dict.fromkeys(f".{api.host_member}" for api in jax_compat.MEMORY_SPACE_APIS))
"""``.Host``: the memory-space members, spelled through any alias of ``jax.memory`` or ``Space``."""
HOST_SPELLING = re.compile("|".join([re.escape(PINNED_HOST), *(rf"{re.escape(member)}\b" for member in HOST_MEMBERS)]))
HOST_SPELLING_BYTES = re.compile(HOST_SPELLING.pattern.encode())
_PINNED_HOST_BYTES = PINNED_HOST.encode()
_HOST_MEMBERS_BYTES = tuple(member.encode() for member in HOST_MEMBERS)
_UNPINNED_HOST_BYTES = UNPINNED_HOST.encode()
DEVICE_DESTINATION = r"""dst\s*=\s*["']device["']|["']device["']\s*,\s*["']device["']"""
"""A policy's destination in device memory as text spells it (``offload_dst="device"``,
``dst='device'``, ``offload_dot_with_no_batch_dims("device", "device")``): the files the check
reads for OFL1211's destinations. One bound to a name elsewhere is left to ``run``."""
_DEVICE_DESTINATION_BYTES = re.compile(DEVICE_DESTINATION.encode())
_CHECKPOINT_NAME_BYTES = b"checkpoint_name"
_OFFLOADED_NAMES_BYTES = b"names_which_can_be_offloaded"
OFFLOAD_SPELLING = re.compile(
    rb"save_and_offload_only_these_names|offload_dot_with_no_batch_dims|Offloadable|compute_on"
)
"""Remat offload policies and ``compute_on``: host memory whatever names the destination."""
_OFFLOAD_WORDS = tuple(word.encode() for word in OFFLOAD_SPELLING.pattern.decode().split("|"))
""":data:`OFFLOAD_SPELLING`'s words: a substring search runs at memory speed, where the regular
expression tries its alternatives at every byte (0.2 s of a cached run over jax, flax and optax)."""
COMPUTE_ON_WORD = "compute_on"
"""The one word of :data:`OFFLOAD_SPELLING` that starts a value the check follows (host compute)."""
POLICY_NAMES = frozenset(word.decode() for word in _OFFLOAD_WORDS) - {COMPUTE_ON_WORD}
"""The remat offload policies (and ``Offloadable``): they move residuals, which ``run`` judges."""
_OFFLOAD_CORE = b"ffload"
"""In every policy's name (``Offloadable`` too): one search rules most files out for all of them."""
_OFFLOAD_CORED = tuple(word for word in _OFFLOAD_WORDS if _OFFLOAD_CORE in word)
_OFFLOAD_OTHERS = tuple(word for word in _OFFLOAD_WORDS if _OFFLOAD_CORE not in word)


def host_kinds_in(text: str) -> int:
    """How many host memory kinds ``text`` spells as words, the way a value the check follows
    spells one (a string's ``"pinned_host"`` or ``"unpinned_host"``, ``.Host``), not a name that
    holds the words (``enable_pinned_host_transfer``): as ``\\b(?:un)?pinned_host\\b|\\.Host\\b``
    counts them, by substring searches (that expression takes 6 ms over a 250 kB class)."""
    count = 0
    for word in (PINNED_HOST, *HOST_MEMBERS):
        start = text.find(word)
        while start >= 0:
            end = start + len(word)
            begin = start - 2 if word == PINNED_HOST and text[start - 2 : start] == "un" else start
            before = text[begin - 1 : begin] if word == PINNED_HOST and begin > 0 else ""
            if not _word_character(before) and not _word_character(text[end : end + 1]):
                count += 1
            start = text.find(word, end)
    return count


def _word_character(character: str) -> bool:
    """A character of a name, as ``\\b`` of a ``str`` expression takes it (Unicode)."""
    return character.isalnum() or character == "_"


def may_hold_host_move(text: str | bytes) -> bool:
    """Whether one file on its own spells both a jit and a host memory kind, or an offload
    policy or ``compute_on``."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return checks_policy_alone(data) or (spells_jit(data) and (spells_host(data) or spells_offload(data)))


def spells_jit(data: bytes) -> bool:
    """Whether the text may name ``jax.jit``/``pjit``: ``jit`` or ``pjit`` as a word (as
    ``rb"\\bp?jit\\b"`` finds it), never inside a longer name. Every name of :data:`.names.JIT`
    ends so, and naming one spells it (``jax.jit``, ``from jax import jit as j``,
    ``getattr(jax, "jit")``); ``jitted`` or ``_jit`` does not. Substring searches, not that
    expression: it has no literal to skip ahead by, and tried every byte of a tree's files
    (four times the time)."""
    index = data.find(_JIT_BYTES)
    while index >= 0:
        start = index - 1 if data[index - 1 : index] == b"p" else index
        if not _word_byte(data[start - 1 : start]) and not _word_byte(data[index + 3 : index + 4]):
            return True
        index = data.find(_JIT_BYTES, index + 3)
    return False


def _word_byte(byte: bytes) -> bool:
    """A byte of an ASCII identifier (what ``\\b`` of a bytes expression takes for a word)."""
    return byte.isalnum() or byte == b"_"


def spells_offload(data: bytes) -> bool:
    """A remat offload policy or ``compute_on``."""
    if _OFFLOAD_CORE in data and any(word in data for word in _OFFLOAD_CORED):
        return True
    return any(word in data for word in _OFFLOAD_OTHERS)


def checks_policy_alone(data: bytes) -> bool:
    """An offload policy and ``unpinned_host`` or a ``"device"`` destination, or the names a
    policy offloads and a ``checkpoint_name``: checked without a jit."""
    if _CHECKPOINT_NAME_BYTES in data and _OFFLOADED_NAMES_BYTES in data:
        return True
    if not spells_offload(data):
        return False
    return _UNPINNED_HOST_BYTES in data or _DEVICE_DESTINATION_BYTES.search(data) is not None


def spells_host(data: bytes) -> bool:
    if _PINNED_HOST_BYTES in data:
        return True  # substring searches first: the regular expression only where ``.Host`` is
    return any(member in data for member in _HOST_MEMBERS_BYTES) and HOST_SPELLING_BYTES.search(data) is not None


def references_jit(tree: ast.Module) -> bool:
    """False when nothing in the module can name ``jax.jit``/``pjit``.

    Over-approximates the interpreter's own resolution (no shadowing, every import counts),
    so a module ruled out here has no jit site the interpreter would find. Imports nearly
    always open the file, so a use resolved through the top-level ones ends the walk early:
    more imports could only add meanings to a name.
    """
    aliases: dict[str, set[str]] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            _add_aliases(statement, aliases)
    jit_names = {name for name, qualnames in aliases.items() if qualnames & JIT}
    attributes: list[ast.Attribute] = []
    loaded: set[str] = set()
    stack: list = [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if node.id in jit_names:
                return True
            loaded.add(node.id)
            continue
        if kind is ast.Attribute and node.attr in ("jit", "pjit"):
            if any(q in JIT for q in _resolve(node, aliases)):
                return True
            attributes.append(node)
        elif kind is ast.Import or kind is ast.ImportFrom:
            _add_aliases(node, aliases)
        for field in node._fields:
            child = getattr(node, field)
            if type(child) is list:
                stack.extend(item for item in reversed(child) if isinstance(item, ast.AST))
            elif isinstance(child, ast.AST):
                stack.append(child)
    if any(q in JIT for name in loaded for q in aliases.get(name, ())):
        return True
    return any(q in JIT for node in attributes for q in _resolve(node, aliases))


def _add_aliases(node: ast.Import | ast.ImportFrom, aliases: dict[str, set[str]]) -> None:
    if isinstance(node, ast.ImportFrom) and (not node.module or node.level):
        return  # a relative import names a module of the project, never JAX's
    for alias in node.names:
        local, qualname = import_binding(node, alias)
        aliases.setdefault(local, set()).add(qualname)


def _resolve(node: ast.AST, aliases: dict[str, set[str]]) -> set[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return set()
    suffix = "".join(f".{p}" for p in reversed(parts))
    return {f"{base}{suffix}" for base in aliases.get(node.id, ())}
