from offload_fixer.cli import main

main()
