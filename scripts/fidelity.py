"""How far the analysis agrees with the released compilers, corpus by corpus.

Every program the repository holds (``tests/xla/corpora.py``: the trigger catalogue, XLA's
own test modules, the examples broken and fixed, the rule pages' examples, the compiler
probes) is lowered for each target and judged twice: by the analysis and by the installed
compiler (libtpu for ``tpu``, JAX's CUDA plugin for ``gpu``). Prints, per corpus and
compiler, the confusion matrix (compiler: E1200 / compiled / other error, against the
analysis), the offloads that do nothing it flags (and how many of those flags the compiled
memory figures contradict, and how many such programs it leaves unflagged), how many
multi-device programs XLA rejects with error 1200 and on how many the analysis names the
instruction XLA names, and every disagreement, in outcome or in detail.

    .venv/bin/python scripts/fidelity.py [--corpus NAME ...] [--target tpu|gpu ...]

Exits 1 when any module disagrees, 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "xla"))

import corpora
from known_differences import known_difference

from offload_fixer import analyze, codes, xla
from offload_fixer.rules import get_rule
from offload_fixer.xla.agreement import compare

CLASSES = ("E1200", "compiled", "other")
PLATFORMS = {"tpu": "tpu", "gpu": "cuda"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=sorted(corpora.CORPORA))
    parser.add_argument("--target", action="append", choices=sorted(PLATFORMS))
    args = parser.parse_args(argv)
    targets = args.target or ["tpu", "gpu"]
    names = tuple(args.corpus) if args.corpus else None

    import jax

    print(f"jax {jax.__version__}")
    judges = {}
    for target in targets:
        try:
            judges[target] = xla.oracle(target)
            judges[target].judge(_smallest_module(PLATFORMS[target]))
            print(f"{target}: {judges[target].compiler}")
        except xla.CompilerUnavailable as exc:
            print(f"{target}: not judged ({exc})")
            del judges[target]

    matrices: dict[tuple[str, str], Counter] = {}
    silent: Counter[tuple[str, str]] = Counter()
    """OFL1211 findings (offloads that do nothing), each held to the compiled memory figures."""
    false_flags: Counter[tuple[str, str]] = Counter()
    """OFL1211 findings the compiled program's memory figures contradict."""
    missed_silent: Counter[tuple[str, str]] = Counter()
    """Programs that keep 0 bytes in host memory though they move values there, unflagged."""
    mesh_names: dict[tuple[str, str], Counter[str]] = {}
    """Multi-device programs XLA rejects with error 1200: how many, and with the name exact."""
    disagreements: list[str] = []
    known: list[str] = []
    skipped = 0
    for program in corpora.programs(names):
        if program.skip():
            skipped += 1
            continue
        for target, judge in judges.items():
            if program.skip_target(target):
                skipped += 1
                continue
            lowered = program.lower(PLATFORMS[target])
            report = analyze(lowered, target, remat_policies=corpora.remat_policies(lowered))
            verdict = judge.judge(lowered)
            agreement = compare(report, verdict)
            matrices.setdefault((program.corpus, target), Counter())[(agreement.xla, agreement.tool)] += 1
            key = (program.corpus, target)
            flags = report.by_code(codes.OFFLOAD_DOES_NOTHING)
            silent[key] += len(flags)
            evidence = get_rule(codes.OFFLOAD_DOES_NOTHING).compiled_evidence
            if verdict.outcome == "compiled" and verdict.memory is not None and evidence is not None:
                false_flags[key] += sum(evidence(verdict, flag) is None for flag in flags)
            missed = corpora.unflagged_silent_offload(lowered, report, verdict)
            missed_silent[key] += missed is not None
            if agreement.xla == "E1200" and _partitions(lowered) > 1:
                names = mesh_names.setdefault(key, Counter())
                names["rejected"] += 1
                names["exact"] += report.predicted.instruction == verdict.instruction
            reason = known_difference(program.id, judge.compiler)
            for difference in (*agreement.differences, *([missed] if missed else [])):
                (known if reason else disagreements).append(f"{program.id} [{target}]: {difference}")

    for (corpus, target), matrix in sorted(matrices.items()):
        compiler = judges[target].compiler
        total = sum(matrix.values())
        agreeing = sum(n for (x, t), n in matrix.items() if x == t)
        print(f"\n{corpus} / {compiler}: {total} modules, outcome agrees on {agreeing}")
        print(f"  {'compiler says':<14}" + "".join(f"{'tool ' + c:>15}" for c in CLASSES))
        for row in CLASSES:
            print(f"  {row:<14}" + "".join(f"{matrix[(row, column)]:>15}" for column in CLASSES))
        key = (corpus, target)
        print(
            f"  offloads that do nothing ({codes.OFFLOAD_DOES_NOTHING}): {silent[key]} flagged, "
            f"{false_flags[key]} false flags, {missed_silent[key]} missed"
        )
        if key in mesh_names:
            names = mesh_names[key]
            print(
                f"  multi-device programs rejected with error 1200: {names['rejected']}, names exact: {names['exact']}"
            )
    print(
        f"\n{len(disagreements)} disagreements ({skipped} skipped: programs the installed JAX cannot build, rule examples for one target only)"
    )
    for line in disagreements:
        print(f"  {line}")
    if known:
        print(f"{len(known)} known differences of an older compiler (tests/xla/known_differences.py)")
        for line in known:
            print(f"  {line}")
    return 1 if disagreements else 0


def _partitions(lowered) -> int:
    """The devices a lowered module is partitioned over (``mhlo.num_partitions``)."""
    from offload_fixer.ir import module as irm

    attrs = irm.load(lowered).module.operation.attributes
    return int(str(attrs["mhlo.num_partitions"]).split(":")[0]) if "mhlo.num_partitions" in attrs else 1


def _smallest_module(platform: str):
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda x: x + 1).trace(jax.ShapeDtypeStruct((8,), jnp.float32)).lower(lowering_platforms=(platform,))


if __name__ == "__main__":
    sys.exit(main())
