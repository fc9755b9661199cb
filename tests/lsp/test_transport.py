"""How deep a message nests, judged before it is decoded (:mod:`offload_fixer.lsp.transport`)."""

from __future__ import annotations

import json

import pytest

from offload_fixer.lsp.transport import MAX_JSON_DEPTH, nested_too_deeply


def _nested(depth: int) -> bytes:
    return json.dumps({"params": {"x": [[{"a": 1}]]}}).encode().replace(b"1", b"[" * depth + b"]" * depth)


@pytest.mark.parametrize("depth", [0, 10, MAX_JSON_DEPTH - 5])
def test_messages_within_the_limit_pass(depth: int) -> None:
    assert not nested_too_deeply(_nested(depth))


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 1_000, 200_000])
def test_messages_past_the_limit_are_refused(depth: int) -> None:
    assert nested_too_deeply(_nested(depth))


def test_brackets_in_strings_and_escaped_quotes_do_not_count() -> None:
    text = '"\\"[[[' + "[" * 500 + '"'
    assert not nested_too_deeply(json.dumps({"text": text, "also": "\\\\", "deep": [[[]]]}).encode())


def test_wide_but_shallow_and_unbalanced_texts() -> None:
    assert not nested_too_deeply(b"[" + b"[[]]," * 10_000 + b"[]]")
    assert nested_too_deeply(b"[[]" * 1_000)  # never closed: each repetition one level deeper
