"""``python -m offload_fixer``: the ``offload-fixer`` command."""

from offload_fixer.cli import entry

entry()
