"""`a2a-agent send` and `a2a-agent tasks ...`: a terminal client of a running server. It
speaks A2A like any caller (the a2a-sdk client, a key as a bearer token), so what it shows
and does is what an orchestrator would see and do.

The key: `--key`, else A2A_AGENT_KEY, else the local server's admin.key
(A2A_AGENT_HOME/admin.key). The server: `--url`, else A2A_AGENT_URL, else
http://127.0.0.1:8000. `--json` prints what the server answered, for scripts.
`tasks watch` shows the task's progress entries, read from its event log (SubscribeToTask
from the first event, resumed with Last-Event-ID), and exits 0 when the task completed, 1
when it failed, 2 when it was canceled or rejected, 3 when it waits for a person, 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client, ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value
from rich.console import Console

from a2a_agent.client_tree import run_tree, tree_view
from a2a_agent.client_view import (
    News,
    request_of,
    state_name,
    status_text,
    task_table,
    tasks_table,
    watch_view,
)
from a2a_agent.whole_numbers import keep_whole_numbers

CATCH_UP_S = 5.0  # at the end, how long the event log may take to reach the last status
EXIT_CODES = {"completed": 0, "failed": 1, "canceled": 2, "rejected": 2}
WAITING = ("input_required", "auth_required")
# What a first message's data part may carry beside a plan (`--plan` takes it in one file).
BESIDE_PLAN = frozenset({"budget", "policy", "workspace", "publish"})


def _key_and_source(args: argparse.Namespace) -> tuple[str | None, str]:
    """The key to send (`--key`, else A2A_AGENT_KEY, else the local admin.key) and where it
    came from, for a refusal's message."""
    if args.key:
        return str(args.key), "the key given with --key"
    if os.environ.get("A2A_AGENT_KEY"):
        return os.environ["A2A_AGENT_KEY"], "the key in A2A_AGENT_KEY"
    admin = Path(os.environ.get("A2A_AGENT_HOME") or "./.a2a-agent") / "admin.key"
    if admin.is_file():
        return admin.read_text().strip(), f"the key in {admin}"
    return None, f"no key (none given with --key or A2A_AGENT_KEY, and no {admin})"


def _refusal(exc: BaseException) -> tuple[int, str] | None:
    """The HTTP status and the server's own words, when an error wraps its answer."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, httpx.HTTPStatusError):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return None
    response = seen.response
    try:
        body = response.json()
    except ValueError:
        return response.status_code, response.text.strip()[:500]
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get("message") or error
    return response.status_code, str(error)


def _url(args: argparse.Namespace) -> str:
    return str(args.url or os.environ.get("A2A_AGENT_URL") or "http://127.0.0.1:8000").rstrip("/")


@asynccontextmanager
async def connected(args: argparse.Namespace) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    key, _ = _key_and_source(args)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        client = await create_client(_url(args), ClientConfig(streaming=False, httpx_client=http))
        try:
            yield client, http
        finally:
            await client.close()


def split_repo(value: str) -> tuple[str, str | None]:
    """`URL@REF` as (URL, REF); REF None when not given. The ref separator is the first '@'
    in the URL's path: an '@' before it is the URL's own (`https://user@host/...`, the
    scp-like `git@host:org/tool.git`), and a ref may hold '/' (`release/1.2`)."""
    scheme, sep, rest = value.partition("://")
    if sep:
        slash = rest.find("/")
        path_at = len(scheme) + len(sep) + (slash if slash >= 0 else len(rest))
    else:
        colon, slash = value.find(":"), value.find("/")
        scp_like = colon > 0 and (slash < 0 or colon < slash)  # [user@]host:path
        path_at = colon + 1 if scp_like else 0
    at = value.find("@", path_at)
    if at < 0:
        return value, None
    url, ref = value[:at], value[at + 1 :]
    if not ref or len(url) <= path_at:
        raise SystemExit(
            f"a2a-agent send: --repo {value!r} is not URL@REF (a branch, tag or commit after "
            "the '@'), nor a URL"
        )
    return url, ref


def _data(payload: dict[str, Any]) -> Part:
    value = Value()
    value.struct_value.update(payload)
    return Part(data=value, media_type="application/json")


def _message(args: argparse.Namespace) -> Message:
    parts = [Part(text=args.goal)] if args.goal else []
    payload = _plan_data(args.plan) if args.plan is not None else {}
    if args.repo:
        if "workspace" in payload:
            raise SystemExit(
                f"a2a-agent send: the plan file {args.plan} says where the workspace starts "
                '("workspace"), and so does --repo: give one of them'
            )
        url, ref = split_repo(args.repo)
        payload["workspace"] = {"git": {"url": url, **({"ref": ref} if ref else {})}}
    if payload:
        parts.append(_data(payload))
    if not parts:
        raise SystemExit("a2a-agent send: give a goal, or --plan FILE")
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts)


def _plan_data(path: Path) -> dict[str, Any]:
    """What `--plan FILE` puts in the message's data part. The file holds the plan itself
    ({"goal", "items", ...}), or the data part as the README sends it: {"plan": {...}},
    with what a first message may carry beside the plan. No plan has a "plan" field, so
    the two cannot be taken one for the other."""
    found = _plan_file(path)
    if not isinstance(found, dict) or "plan" not in found:
        return {"plan": found}
    beside = sorted(set(found) - BESIDE_PLAN - {"plan"})
    if beside:
        raise SystemExit(
            f'a2a-agent send: the plan file {path} has "plan" beside {beside}: give the plan '
            'itself ({"goal": ..., "items": [...]}), or {"plan": {...}} with only '
            f"{', '.join(repr(k) for k in sorted(BESIDE_PLAN))} beside it"
        )
    return dict(found)


def _plan_file(path: Path) -> Any:
    """The plan in `path` (`-`: standard input), or a message saying what is wrong with it."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        raise SystemExit(
            f"a2a-agent send: cannot read the plan file {path}: {exc.strerror}"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(
            f"a2a-agent send: the plan file {path} is not JSON (line {exc.lineno}, column "
            f"{exc.colno}: {exc.msg})"
        ) from None


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


async def _send(args: argparse.Namespace, console: Console) -> int:
    message = _message(args)  # before connecting: a bad plan file is the caller's to fix
    async with connected(args) as (client, http):
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        task = None
        async for response in client.send_message(request):
            if response.HasField("task"):
                task = response.task
        if task is None:
            console.print("[red]the server answered without a task[/red]")
            return 1
        if args.json and not args.watch:
            _print_json(MessageToDict(task))
        elif not args.watch:
            print(task.id)
        if args.watch:
            return await _watch(args, client, http, task.id, console, as_json=args.json)
    state = state_name(task)
    if state != "completed" and state in EXIT_CODES:  # refused at once (no model, say)
        print(
            f"a2a-agent send: task {task.id} is {state}: {status_text(task.status)}",
            file=sys.stderr,
        )
        return EXIT_CODES[state]
    return 0


async def _follow(
    args: argparse.Namespace, http: httpx.AsyncClient, task_id: str, news: News, woke: asyncio.Event
) -> None:
    """Read the task's event log into `news`, from its first event: SubscribeToTask with
    Last-Event-ID, resumed after the last event taken whenever the stream ends (the server
    ends it when the task waits or ends) or breaks."""
    client = await create_client(_url(args), ClientConfig(streaming=True, httpx_client=http))
    try:
        while True:
            after = {"Last-Event-ID": f"{task_id}:{news.seq}"}
            try:
                async for response in client.subscribe(
                    SubscribeToTaskRequest(id=task_id),
                    context=ClientCallContext(service_parameters=after),
                ):
                    news.take(response)
                    woke.set()
            except (A2AError, httpx.HTTPError, OSError):
                pass  # resumed below, from the last event taken
            await asyncio.sleep(1.0)
    finally:
        await client.close()


async def _watch(
    args: argparse.Namespace,
    client: Client,
    http: httpx.AsyncClient,
    task_id: str,
    console: Console,
    *,
    as_json: bool,
) -> int:
    """Follow the task until it ends or waits; the exit code says how it ended."""
    news, woke = News(), asyncio.Event()
    reader = asyncio.create_task(_follow(args, http, task_id, news, woke))
    try:
        task = await client.get_task(GetTaskRequest(id=task_id))
        with watch_view(console, disabled=as_json) as view:
            while True:
                if reader.done():  # no stream (the server offers none): sample the status
                    news.sample(task)
                view.update(task, news.entries)
                state = state_name(task)
                if state in EXIT_CODES or state in WAITING:
                    # Show every entry up to this end (a log already pruned has none).
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(CATCH_UP_S):
                            while not news.caught_up(task) and not reader.done():
                                woke.clear()
                                await woke.wait()
                    view.update(task, news.entries)
                    break
                woke.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woke.wait(), 1.0)
                    await asyncio.sleep(0.1)  # events come in bursts: one read for a burst
                task = await client.get_task(GetTaskRequest(id=task_id))
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    text = status_text(task.status)
    if as_json:
        _print_json(MessageToDict(task))
    else:
        console.print(f"{task_id}: {state} — {text}", soft_wrap=True, markup=False)
    return EXIT_CODES.get(state, 3)


async def _tasks(args: argparse.Namespace, console: Console) -> int:
    async with connected(args) as (client, http):
        if args.action == "list":
            request = ListTasksRequest(page_size=100, include_artifacts=True)
            if args.state:
                request.status = TaskState.Value(f"TASK_STATE_{args.state.upper()}")
            found = await client.list_tasks(request)
            if args.json:
                _print_json([MessageToDict(t) for t in found.tasks])
            else:
                console.print(tasks_table(list(found.tasks), found.total_size))
            return 0
        task_id = args.task_id
        if args.action == "watch":
            return await _watch(args, client, http, task_id, console, as_json=args.json)
        if args.action == "cancel":
            task = await client.cancel_task(CancelTaskRequest(id=task_id))
            _print_json(MessageToDict(task)) if args.json else console.print(
                f"{task_id}: {state_name(task)}"
            )
            return 0
        task = await client.get_task(GetTaskRequest(id=task_id))
        if args.action == "show":
            _print_json(MessageToDict(task)) if args.json else console.print(task_table(task))
            return 0
        if args.action == "diff":
            return await _diff(task, http, console)
        if args.action == "tree":
            return await _tree(client, task, console, as_json=args.json)
        return await _decide(args, client, task, console)


async def _tree(client: Client, task: Task, console: Console, *, as_json: bool) -> int:
    async def fetch(task_id: str) -> Task | None:
        try:
            return await client.get_task(GetTaskRequest(id=task_id))
        except TaskNotFoundError:
            return None

    found = await run_tree(task, fetch)
    _print_json(found) if as_json else console.print(tree_view(found))
    return 0


async def _diff(task: Task, http: httpx.AsyncClient, console: Console) -> int:
    for artifact in task.artifacts:
        if artifact.artifact_id != "diff":
            continue
        part = artifact.parts[0]
        if part.WhichOneof("content") == "raw":
            sys.stdout.write(part.raw.decode(errors="replace"))
        else:
            response = await http.get(part.url)
            response.raise_for_status()
            sys.stdout.write(response.text)
        return 0
    state = state_name(task)
    if state in EXIT_CODES:  # ended: a task refused at once never had a workspace
        console.print(f"[yellow]{task.id} is {state} and has no diff: no work was kept[/yellow]")
    else:
        console.print(f"[yellow]{task.id} has no diff yet: it comes when the run ends[/yellow]")
    return 1


async def _decide(args: argparse.Namespace, client: Client, task: Task, console: Console) -> int:
    """Approve or reject the task's pending request, as an A2A reply."""
    request = request_of(task)
    if request is None and args.request_id is None:
        console.print(f"[yellow]{task.id} is {state_name(task)} and asks nothing now[/yellow]")
        return 1
    options = list((request or {}).get("options") or ["approve", "reject"])
    decision = options[0] if args.action == "approve" else options[-1]
    body: dict[str, Any] = {
        "decision": decision,
        "id": args.request_id or (request or {}).get("id"),
    }
    if args.note:
        body["note"] = args.note
    reply = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=task.id,
        parts=[_data({"approval": body})],
    )  # fmt: skip
    answered = None
    async for response in client.send_message(
        SendMessageRequest(
            message=reply, configuration=SendMessageConfiguration(return_immediately=True)
        )
    ):
        if response.HasField("task"):
            answered = response.task
    if args.json and answered is not None:
        _print_json(MessageToDict(answered))
    else:
        console.print(
            f"{task.id}: {decision} sent; now {state_name(answered) if answered else '?'}"
        )
    return 0


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """Stdout closed (`| head`): end as for any other write to it, quietly (`entry`),
        where rich would exit 1 as for an error."""
        self.quiet = True
        raise BrokenPipeError


def run(args: argparse.Namespace) -> int:
    console = _Console(stderr=False, highlight=False)
    # `--json` prints tasks through protobuf's printer, which writes every count as a float.
    keep_whole_numbers()
    try:
        if args.command == "send":
            return asyncio.run(_send(args, console))
        return asyncio.run(_tasks(args, console))
    except KeyboardInterrupt:
        return 130
    except (A2AError, A2AClientError) as exc:
        refused = _refusal(exc)
        if refused is not None and refused[0] in (401, 403):
            print(
                f"a2a-agent: {_url(args)} refused {_key_and_source(args)[1]}: {refused[1]}",
                file=sys.stderr,
            )
        elif refused is not None:
            print(f"a2a-agent: {_url(args)} answered {refused[0]}: {refused[1]}", file=sys.stderr)
        else:
            print(f"a2a-agent: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # stdout closed (`| head`), not the server: `entry` ends quietly
    except (httpx.HTTPError, OSError) as exc:
        print(f"a2a-agent: cannot reach {_url(args)}: {exc}", file=sys.stderr)
        return 1
