"""The ``ktune`` command line (``ktune.cli.app:main``): the top layer, the only importer of
``ktune.server``."""
