"""``python -m eegrad``: the ``eegrad`` command, from the interpreter that runs it."""

from .cli import main

raise SystemExit(main())
