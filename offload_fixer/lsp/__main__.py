"""``python -m offload_fixer.lsp``: the language server on stdio."""

from offload_fixer.lsp import main

if __name__ == "__main__":  # not when a spawned worker imports it as __mp_main__
    main()
