"""The oracle tests' imports: the corpora and probes beside them, the examples' support and the
analysis tests' helpers. The compilers themselves are fixtures for the whole suite
(``tests/conftest.py``: ``tpu_compiler``, ``gpu_compiler``, ``judge``).
"""

from __future__ import annotations

import sys
from pathlib import Path

for folder in (Path(__file__).parent, Path(__file__).parents[1] / "examples", Path(__file__).parents[1] / "analysis"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
