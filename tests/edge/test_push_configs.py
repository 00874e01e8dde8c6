"""What a push config to be made may hold: each refusal names the field and the character."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types.a2a_pb2 import AuthenticationInfo, TaskPushNotificationConfig

from a2a_agent.edge.push_configs import unstorable


def config(**fields: Any) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        **{"task_id": "t", "url": "https://hooks.example/in"} | fields
    )


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        # It was "the token contains a control character; no such id exists": the words of a
        # lookup by id, for a value that is no id.
        (
            {"token": "a\x00b"},
            "the token contains a NUL character (\\u0000), which cannot travel in an HTTP "
            "header (X-A2A-Notification-Token); remove it",
        ),
        (
            {"id": "mine\x01"},
            "the push config id contains a control character (U+0001), which a push config "
            "id may not hold; remove it",
        ),
        ({"url": "https://hooks.example/\x00"}, "the webhook URL contains a NUL character"),
        (
            {"authentication": AuthenticationInfo(scheme="Bearer", credentials="x\x00")},
            "authentication.credentials contains a NUL character",
        ),
        (
            {"authentication": AuthenticationInfo(scheme="Bearer\x1f", credentials="x")},
            "authentication.scheme contains a control character (U+001F)",
        ),
    ],
)
def test_a_control_character_is_refused_naming_its_field(fields: dict[str, Any], said: str) -> None:
    refusal = unstorable(config(**fields))
    assert refusal is not None and refusal.startswith(said), refusal
    assert "no such id" not in refusal


def test_a_plain_config_and_an_hmac_secret_of_any_bytes_are_taken() -> None:
    assert unstorable(config(id="mine", token="tok-1")) is None
    secret = AuthenticationInfo(scheme="HMAC-SHA256", credentials="\x01" * 32)
    assert unstorable(config(authentication=secret)) is None
