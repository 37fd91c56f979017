"""``python -m anatomy_kit.verdicts check | show [CLAIM]``: the rule registry's command line."""

from .registry_cli import main

raise SystemExit(main())
