"""``python -m mm2py`` runs the CLI (the same entry point as the ``mm2py`` console script)."""

from mm2py.cli.app import main

main()
