"""``python -m anatomy_kit``: the command line of :mod:`anatomy_kit.book.cli`."""

import sys

from .book.cli import main

sys.exit(main())
