"""``python -m offload_fixer.lsp``: the language server on stdio."""

from offload_fixer.lsp import main

main()
