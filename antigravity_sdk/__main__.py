"""`python -m antigravity_sdk`: the `antigravity` command line."""

from antigravity_sdk.cli import main

raise SystemExit(main())
