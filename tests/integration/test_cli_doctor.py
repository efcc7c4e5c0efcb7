"""`antigravity doctor` against the REAL harness: it initializes a conversation (no model
is called) and reports the harness's command sandbox status."""

from __future__ import annotations

import re

import pytest

from antigravity_sdk import cli


def test_doctor_initializes_a_conversation_and_reports_the_sandbox(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^\[ OK \] harness starts( contained)?, completes its handshake and initializes a "
        "conversation$",
        out,
        re.MULTILINE,
    ), out
    status = re.search(r"^\[INFO\] harness command sandbox: (.*)$", out, re.MULTILINE)
    assert status is not None, out
    assert status.group(1).startswith(("available", "unavailable", "not reported"))
