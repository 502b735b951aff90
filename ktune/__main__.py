"""``python -m ktune``: the ``ktune`` command, for environments whose console scripts are not
on PATH (a ``pip install --target`` tree, say)."""

import sys

from ktune.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
