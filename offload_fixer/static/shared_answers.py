"""The answers of :mod:`.candidates` about a project's modules, shared by every check of one
run: a module imported by many checked files is resolved once."""

from __future__ import annotations

from typing import Any

from .project import Consulted, ModuleFacts, Project


class SharedAnswers:
    """The final answers about the modules of a project kept for every check of one run
    (:attr:`.Project.snapshot`): a module imported by many checked files is resolved once.

    An answer about a module depends on the modules it reads names from, and on what finding
    them asked of the disk, which a check records for the result cache
    (:meth:`.Project.consulting`). So each module keeps what computing its answers asked
    (``asked``) and the modules whose answers they used (``uses``); a check that takes an
    answer notes again what the module and every module it used, transitively, asked."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[tuple[Any, ...], Any]] = {}
        """module path -> (what was asked, without the module) -> its final answer."""
        self.facts: dict[str, ModuleFacts] = {}
        """module path -> the facts its answers were found from."""
        self.asked: dict[str, Consulted] = {}
        self.uses: dict[str, set[str]] = {}

    def answer(self, facts: ModuleFacts, key: tuple[Any, ...]) -> Any:
        if self.facts.get(facts.path) is not facts:
            return None
        return self.answers[facts.path].get(key)

    def keep(self, facts: ModuleFacts, key: tuple[Any, ...], answer: Any) -> None:
        if self.facts.get(facts.path) is not facts:
            self.facts[facts.path] = facts
            self.answers[facts.path] = {}
        self.answers[facts.path][key] = answer

    def record(self, path: str) -> Consulted:
        found = self.asked.get(path)
        if found is None:
            found = self.asked[path] = Consulted(set(), {})
        return found


def shared_answers(
    project: Project | None, facts: ModuleFacts, importer: str | None, host: bool
) -> SharedAnswers | None:
    """The answers a check of ``facts`` shares with the run's other checks: only in a run
    (:attr:`.Project.snapshot`) and only when the checked text is the module its importers
    read (a text of no file, an editor's unsaved buffer: answers of its own)."""
    if project is None or importer is None or not project.snapshot or not project.reads_as(importer, facts.data):
        return None
    key = "candidates.host" if host else "candidates.jit"
    found = project.memo.get(key)
    if found is None:
        found = project.memo[key] = SharedAnswers()
    return found
