"""What the door reads of a JSON-RPC call before the SDK does, and answers itself: a method of
the other A2A version than the request's header, and a 0.3 call whose params the SDK's 0.3
models refuse (that layer answers those with pydantic's dump and a logged traceback).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    InvalidParamsError,
    InvalidRequestError,
    VersionNotSupportedError,
)

from a2a_agent.edge.params_v03 import params_problem
from a2a_agent.edge.versions import (
    METHODS_V03_TO_V10,
    V03,
    method_version_mismatch,
    version_of_header,
)

VERSION_NOT_SUPPORTED = JSON_RPC_ERROR_CODE_MAP[VersionNotSupportedError]
INVALID_PARAMS = JSON_RPC_ERROR_CODE_MAP[InvalidParamsError]
INVALID_REQUEST = JSON_RPC_ERROR_CODE_MAP[InvalidRequestError]

Answer = dict[str, Any]


def parsed_call(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC request object in `body`, or None for anything else (a batch, text that
    is not JSON): the SDK says what is wrong with those."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    return call if isinstance(call, dict) and isinstance(call.get("method"), str) else None


def answer_now(call: dict[str, Any], version: str | None) -> Answer | None:
    """The door's answer to `call`, with its id, when the SDK would answer it worse; None to
    hand it on."""
    method = call["method"]
    protocol = version_of_header(version)
    said = method_version_mismatch(method, protocol)
    if said is not None:
        # VersionNotSupported (-32009, 1.0's code), which either kind of client reads better
        # than 0.3's internal error, saying what to change.
        return _error(call, VERSION_NOT_SUPPORTED, said)
    if protocol == V03 and method in METHODS_V03_TO_V10:
        problem = params_problem(method, call)
        if problem is not None:
            in_params, text = problem
            return _error(call, INVALID_PARAMS if in_params else INVALID_REQUEST, text)
    return None


def _error(call: dict[str, Any], code: int, message: str) -> Answer:
    given = call.get("id")
    # The id echoed when JSON-RPC allows it as one (a string or a number, not a boolean).
    request_id = given if isinstance(given, str | int) and not isinstance(given, bool) else None
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
