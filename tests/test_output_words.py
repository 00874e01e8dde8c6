"""How a failed command's output is said after "`cmd` exited N.": its tail, or, when it
printed nothing, that it printed nothing (it was "Output tail:" with nothing under it)."""

from __future__ import annotations

from a2a_agent.harness.kernel.evidence import STATUS_OUTPUT_CHARS, output_in_words
from a2a_agent.harness.kernel.render import progress_document
from persistence.records import ItemRow


def test_a_command_that_printed_nothing_says_so() -> None:
    for tail in ("", "\n", "  \n\n"):
        assert output_in_words(tail) == "It printed nothing."
        assert output_in_words(tail, fenced=True) == "It printed nothing."


def test_a_command_that_printed_something_shows_its_tail() -> None:
    assert output_in_words("boom\n") == "Output tail:\nboom"
    assert output_in_words("boom\n", fenced=True) == "Output tail:\n\n```\nboom\n```"
    long = "x" * (STATUS_OUTPUT_CHARS + 10) + "end"
    assert output_in_words(long, chars=STATUS_OUTPUT_CHARS) == (
        "Output tail:\n" + long[-STATUS_OUTPUT_CHARS:]
    )


def test_progress_md_says_a_silent_failure_printed_nothing() -> None:
    failed = ItemRow(
        item_id="a", position=0, title="A", run="true", verify_command="false",
        verify_timeout_s=60, max_attempts=1, status="failed", attempts=1,
        evidence={"command": "false", "exit_code": 1, "output_tail": ""},
        commit_sha=None, failures=1,
    )  # fmt: skip
    text = progress_document("T", "g", [failed], [])
    assert "`false` exited 1. It printed nothing.\n" in text
    assert "Output tail" not in text
