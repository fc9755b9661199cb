from offload_fixer.cli import entry

entry()
