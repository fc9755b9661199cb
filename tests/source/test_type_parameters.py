"""PEP 695's type parameters and ``type`` aliases read by ``ast`` under Python 3.11: the
statements of a 3.12 file sit where they are, and anything else still refused is refused."""

from __future__ import annotations

import ast
import sys

import pytest

from offload_fixer.source.type_parameters import parse

OLDER = sys.version_info < (3, 12)


def places(tree: ast.Module) -> list[tuple[int, int, int | None, int | None]]:
    return [
        (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "class ValueHolder[ValueType](Protocol):\n    pass\n",
        "def decorator[T: Callable[..., Any]](impl: T) -> T:\n    return impl\n",
        "async def fetch[T](x: T) -> T:\n    return x\n",
        "class Tracer[TraceType: Trace](TracerBase, metaclass=TracerMeta):\n    x = 1\n",
        "class C:\n    def m[T](self): pass\n\n    type Y = int\n",
        "type BlockDim = Element | Squeezed | Blocked\n",
        "type Pair[T] = tuple[T, T]\n",
        "x = 1\r\nclass C[T: 'a]b']: pass\r\ny = 2\n",
        "@jax.jit\ndef f[T](x):\n    return x\n",
        'def f[T](x):\n    """Like\ndef g[T](y):\n    and\ntype A = B\n"""\n    return x\n',  # look-alikes in a string
        "".join(f"def f{i}[T](x: T) -> T:\n    return x\n\n\n" for i in range(100)),  # more than one parse each
    ],
)
def test_statements_sit_where_they_do_in_the_text(text):
    tree = parse(text, newer_syntax=True)
    lines = text.replace("\r\n", "\n").split("\n")
    keywords = {"ClassDef": "class", "FunctionDef": "def", "AsyncFunctionDef": "async", "Pass": "pass"}
    keywords |= {"Return": "return", "AnnAssign": "type", "TypeAlias": "type", "Expr": '"""'}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, ast.Assign):
            assert lines[node.lineno - 1][node.col_offset :].startswith(keywords[type(node).__name__])
            assert node.end_lineno is not None and node.end_col_offset is not None
            assert node.end_col_offset == len(lines[node.end_lineno - 1].rstrip("\r")) or type(node).__name__ in {
                "ClassDef",
                "FunctionDef",
                "AsyncFunctionDef",
            }
    if not OLDER:  # this Python reads them itself: the same places as its own tree
        assert places(tree) == places(ast.parse(text))


@pytest.mark.skipif(not OLDER, reason="Python 3.12 parses type parameters itself")
def test_under_an_older_python_an_alias_is_an_annotation_and_a_parameter_list_blank_space():
    (alias,) = parse("type Pair[T] = tuple[T, T]\n", newer_syntax=True).body
    assert isinstance(alias, ast.AnnAssign) and alias.value is None
    assert isinstance(alias.target, ast.Name) and alias.target.id == "Pair"
    assert ast.unparse(alias.annotation) == "tuple[T, T]" and alias.annotation.col_offset == 15
    (function,) = parse("def f[T: int](x): pass\n", newer_syntax=True).body
    assert isinstance(function, ast.FunctionDef) and function.args.args[0].col_offset == 14


@pytest.mark.parametrize(
    "text",
    [
        "def f[\n    T\n](): pass\n",  # brackets across lines: blanked in place, they would not parse
        'def f(): return f"{x["a"]}"\n',  # PEP 701's f-string: nothing to blank
        "class C[T]: pass\ndef g(:\n",  # a real error after the construct
        "def f[T](: pass\n",
    ],
)
def test_what_is_not_a_type_parameter_list_is_refused_as_ast_refuses_it(text):
    try:
        ast.parse(text)
    except SyntaxError as refused:
        with pytest.raises(SyntaxError) as raised:
            parse(text, newer_syntax=True)
        assert (raised.value.lineno, raised.value.offset, raised.value.msg) == (
            refused.lineno,
            refused.offset,
            refused.msg,
        )
    else:  # this Python reads it (3.12: multi-line type parameters, PEP 701)
        assert ast.dump(parse(text, newer_syntax=True)) == ast.dump(ast.parse(text))


@pytest.mark.skipif(not OLDER, reason="Python 3.12 parses type parameters itself")
def test_only_where_libcst_judges_the_file():
    with pytest.raises(SyntaxError):
        parse("class C[T]: pass\n")  # a file written for this Python: CPython's verdict stands
    with pytest.raises(SyntaxError):
        parse("class C[T]: pass\n", feature_version=(3, 10), newer_syntax=True)
