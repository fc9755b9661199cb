"""Make the catalogue programs importable as the ``catalogue`` package, whatever the import mode."""

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
