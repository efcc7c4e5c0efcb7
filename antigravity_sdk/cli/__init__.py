"""The `antigravity` command (also `python -m antigravity_sdk`), one module per command:
`_commands` (the parser; policy, harness, doctor), `chat`, `demo`, and what they share:
`report` (the terminal report) and `shell` (shell-command rules). The library never
imports this package."""

from ._commands import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
