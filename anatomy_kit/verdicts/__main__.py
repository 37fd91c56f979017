"""``python -m anatomy_kit.verdicts check | show [CLAIM]``: the rule registry's command line (:func:`.registry.main`)."""

from .registry import main

raise SystemExit(main())
