"""The docs name the artifacts as the code names them: the README called the report
artifact `report`, which is only its id; a client looking for an artifact by name finds
`final-report`."""

from __future__ import annotations

from pathlib import Path

from a2a_agent.edge.task_view import report_artifact

REPO = Path(__file__).resolve().parent.parent


def test_the_report_artifact_is_named_as_the_service_names_it() -> None:
    artifact = report_artifact({"summary": "s"})
    named = f"`artifactId` `{artifact['artifactId']}`, `name` `{artifact['name']}`"
    for doc in ("README.md", "docs/using.md"):
        text = " ".join((REPO / doc).read_text().split())
        assert named in text, doc
        assert "a `report` artifact" not in text, doc
