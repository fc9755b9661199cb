"""Run scripts on an attached accelerator, one process for all (opening a TPU costs seconds per
process), and record each one's outcome: what it printed, or the error it stopped with.

    python3 scripts/chip_eager.py RECORD.json NAME=PROGRAM.py ...

Each program runs as ``__main__`` in this process, in the order given; the record is written
after each one, so a program that aborts the process leaves the others' outcomes. The record
carries the JAX, jaxlib and libtpu versions, the device kind and the date: what
``tests/chip/test_eager_record.py`` holds the tool's eager fixes to.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import runpy
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in item for item in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    import jax

    out = Path(argv[0])
    record = {
        "date": datetime.date.today().isoformat(),
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "libtpu": _version("libtpu", "libtpu-nightly"),
        "device_kind": jax.devices()[0].device_kind,
        "devices": jax.device_count(),
        "programs": {},
    }
    for item in argv[1:]:
        name, path = item.split("=", 1)
        printed = io.StringIO()
        start = time.perf_counter()
        outcome: dict = {"program": Path(path).name, "source": Path(path).read_text()}
        try:
            with contextlib.redirect_stdout(printed):
                runpy.run_path(path, run_name="__main__")
            outcome["ran"] = True
        except BaseException as exc:  # noqa: BLE001 - recorded: the chip's verdict
            outcome["ran"] = False
            outcome["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            frames = traceback.extract_tb(exc.__traceback__)[-3:]
            outcome["where"] = [f"{Path(f.filename).name}:{f.lineno}" for f in frames]
        outcome["stdout"] = printed.getvalue()
        outcome["seconds"] = round(time.perf_counter() - start, 3)
        record["programs"][name] = outcome
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(name, "ran" if outcome["ran"] else outcome["error"][:200], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
