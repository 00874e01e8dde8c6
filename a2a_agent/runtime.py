"""The runtime: one object that opens and closes everything a process needs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType

from a2a_agent.budget import BudgetGuard
from a2a_agent.database import sqlalchemy_url
from a2a_agent.delivery.deliverer import PushDeliverer
from a2a_agent.delivery.guard import AllowList
from a2a_agent.delivery.process import delivery_config
from a2a_agent.delivery.signing import Signer
from a2a_agent.delivery.transport import WebhookClient
from a2a_agent.edge.admin_key import ensure_admin_key
from a2a_agent.engine.dbos_engine import DbosEngine
from a2a_agent.engine.peer_watch import PeerWatch
from a2a_agent.engine.retention import Retention
from a2a_agent.harness.context import HarnessConfig, StepContext
from a2a_agent.harness.decisions import DecisionSteps
from a2a_agent.harness.delegates import DelegationConfig
from a2a_agent.harness.delegation import Delegator
from a2a_agent.harness.effects import Effects
from a2a_agent.harness.endings import RunEndings
from a2a_agent.harness.facts import FactSteps
from a2a_agent.harness.git_remote import GitRemote
from a2a_agent.harness.model_work import ModelConfig, ModelWork
from a2a_agent.harness.pauses import PauseConfig, Pauses, compile_patterns
from a2a_agent.harness.plan_harness import PlanHarness
from a2a_agent.harness.sandbox import Sandbox
from a2a_agent.harness.unpack import Limits
from a2a_agent.liveness import mark_alive
from a2a_agent.model.anthropic_adapter import AnthropicModel
from a2a_agent.observe import tracing
from a2a_agent.peers import PeerClient
from a2a_agent.plans import PlanLimits
from a2a_agent.settings import APPLICATION_VERSION, Settings
from a2a_agent.sources import SourceRules
from a2a_agent.startup import freeze_startup_objects
from a2a_agent.watched import FaultPoint, watch
from persistence.budgets import PostgresBudgets
from persistence.cache import TaskReadCache
from persistence.db import create_pool
from persistence.delegations import PostgresDelegationStore
from persistence.errors import StoreError
from persistence.health import DatabaseHealth
from persistence.keys import PostgresKeyStore
from persistence.ledger import PostgresLedger
from persistence.migrate import latest_version, migrate
from persistence.notify import TaskNotifier
from persistence.push import PostgresPushStore
from persistence.replies import PostgresReplyStore
from persistence.runs import PostgresRunStore
from persistence.secrets import SecretBox
from persistence.tasks import PostgresTaskStore
from persistence.watch import PostgresWatchdogStore
from persistence.workers import WorkerIdentity, WorkerRegistry


def plan_limits(settings: Settings) -> PlanLimits:
    return PlanLimits(
        max_items=settings.max_plan_items,
        default_max_attempts=settings.default_max_attempts,
        default_verify_timeout_s=settings.verify_timeout_s,
        max_verify_timeout_s=settings.command_timeout_s,
        peers=frozenset(settings.peers),
    )


@dataclass
class Health:
    database: bool
    schema_current: bool
    heartbeat_fresh: bool

    @property
    def ready(self) -> bool:
        return self.database and self.schema_current and self.heartbeat_fresh


class Runtime:
    """Built once per process by the app factory (or the worker command)."""

    def __init__(self, settings: Settings, conninfo: str, *, role: str) -> None:
        self.settings = settings
        self.conninfo = conninfo
        self.role = role
        self.sandbox = Sandbox(
            enabled=settings.sandbox,
            network=settings.command_network,
            hidden=(settings.home, Path.home()),
            shared=settings.sandbox_shared,
        )
        self.pool = create_pool(conninfo, max_size=settings.db_pool_max)
        # GetTask reads from this cache; NOTIFY (via the notifier) keeps it honest.
        self.read_cache = TaskReadCache()
        self.store = PostgresTaskStore(self.pool, self.read_cache)
        self.runs = PostgresRunStore(self.pool, self.read_cache)
        self.database = DatabaseHealth(self.pool)
        self.notifier = TaskNotifier(
            conninfo, self.read_cache, tick=FaultPoint(settings.fault_file, "notifier")
        )
        self.ledger = PostgresLedger(self.pool)
        self.budgets = PostgresBudgets(self.pool)
        self.guard = BudgetGuard(
            self.budgets, pause_pct=settings.budget_pause_pct, prices=settings.prices
        )
        self.context = StepContext(
            self.runs,
            self.ledger,
            self.guard,
            HarnessConfig(
                workspaces=settings.workspaces,
                command_env=settings.command_env,
                command_timeout_s=settings.command_timeout_s,
                output_tail_bytes=settings.output_tail_bytes,
                executor_id=settings.executor_id,
                sandbox=self.sandbox,
                reverify_parallelism=settings.reverify_parallelism,
                remote=GitRemote(
                    source_rules(settings), self.sandbox, timeout_s=settings.clone_timeout_s
                ),
                unpack=Limits(settings.max_input_files, settings.max_unpacked_bytes),
                max_download_bytes=settings.max_input_bytes,
                public_url=settings.url,
                inline_output_bytes=settings.inline_output_bytes,
                fault_file=settings.fault_file,
            ),
        )
        endings = RunEndings(self.context)
        pauses = Pauses(
            self.context,
            PauseConfig(
                expires_s=settings.approval_expires_s,
                irreversible=compile_patterns(settings.irreversible_patterns),
                pause_pct=settings.budget_pause_pct,
            ),
        )
        effects = Effects(self.context, endings, self.notifier, pauses)
        self.harness = PlanHarness(self.context, effects, endings)
        self.decisions = DecisionSteps(self.context, endings, pauses)
        self.replies = PostgresReplyStore(self.pool, self.read_cache)
        self.secrets = SecretBox.from_settings(settings.secret_key, settings.home)
        self.push = PostgresPushStore(self.pool, self.secrets)
        self.keys = PostgresKeyStore(self.pool)
        self.allow = AllowList.parse(settings.push_allow_hosts)
        self.webhooks = WebhookClient(self.allow)
        self.signer = Signer(settings.url)
        self.deliverer = PushDeliverer(
            self.push,
            self.notifier,
            config=delivery_config(settings),
            client=self.webhooks,
            signer=self.signer,
        )
        self.registry = WorkerRegistry(
            self.pool,
            WorkerIdentity(
                executor_id=settings.executor_id,
                role=role,
                host=socket.gethostname(),
                pid=os.getpid(),
            ),
            timeout_s=settings.heartbeat_timeout_s,
        )
        self.model = (
            AnthropicModel(
                api_key=settings.anthropic_api_key,
                model=settings.model,
                base_url=settings.anthropic_base_url,
                timeout_s=settings.model_timeout_s,
                max_retries=settings.model_max_retries,
            )
            if settings.anthropic_api_key
            else None
        )
        self.work = ModelWork(
            self.context,
            effects,
            self.model,
            ModelConfig(
                max_tokens=settings.model_max_tokens,
                min_output_tokens=settings.model_min_tokens,
                compact_at_tokens=settings.compact_at_tokens,
                max_turns=settings.max_turns,
                plan_tries=settings.plan_tries,
                tool_output_bytes=settings.tool_output_bytes,
                bash_timeout_s=settings.command_timeout_s,
                plan_limits=plan_limits(settings),
                repo_context_tokens=settings.repo_context_tokens,
            ),
        )
        self.peers = PeerClient(settings.peers)
        self.delegations = PostgresDelegationStore(self.pool)
        self.peer_watch = PeerWatch(
            self.delegations,
            self.peers,
            lambda task_id, segment: self.engine.start(task_id, segment),  # noqa: PLW0108 (made below)
            poll_s=settings.peer_poll_s,
        )
        self.delegator = Delegator(
            self.context,
            effects,
            children=self.store,
            store=self.delegations,
            peers=self.peers,
            config=DelegationConfig(
                plan_limits=plan_limits(settings),
                budget_defaults=settings.budget_defaults,
                budget_caps=settings.budget_caps,
                policy_defaults={
                    "on_item_failure": settings.on_item_failure,
                    "on_regression": settings.on_regression,
                    "budget_pause": settings.budget_pause,
                },
                public_url=settings.url,
                tag=self.secrets.tag,
            ),
        )
        self.work.delegator = self.delegator
        self.decisions.delegator = self.delegator
        self.engine = DbosEngine(
            store=PostgresWatchdogStore(self.pool),
            harness=self.harness,
            work=self.work,
            decisions=self.decisions,
            facts=FactSteps(self.context, effects),
            delegator=self.delegator,
            watch_peers=self.peer_watch.poll if settings.peers else None,
            replies=self.replies,
            registry=self.registry,
            system_database_url=sqlalchemy_url(conninfo),
            conninfo=conninfo,
            application_version=APPLICATION_VERSION,
            run_worker=settings.run_worker,
            worker_concurrency=settings.worker_concurrency,
            reconcile_interval_s=settings.reconcile_interval_s,
            queue_poll_s=settings.queue_poll_s,
            shutdown_grace_s=settings.shutdown_grace_s,
            stuck_after_s=settings.stuck_after_s,
            max_run_age_s=settings.max_run_age_s,
            retention=Retention(
                workspaces=settings.workspaces,
                push_s=settings.push_retention_s,
                task_s=settings.task_retention_s,
                record_s=settings.record_retention_s,
            ),
            fault=FaultPoint(settings.fault_file, "supervisor"),
            alive=partial(mark_alive, settings.home, settings.executor_id),
        )
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Runtime:
        if self.settings.run_worker:
            self.sandbox.check()
        # Per process (a forked child sets up its own): the exporter OTEL_* names, if any.
        if tracing.configure(self.settings.executor_id):
            self._stack.callback(tracing.shutdown)
        await migrate(self.conninfo)
        self.settings.workspaces.mkdir(parents=True, exist_ok=True)
        await self.pool.open(wait=True, timeout=30)
        self._stack.push_async_callback(self.pool.close)
        await self.signer.load(self.push)
        if self.role == "serve" and not self.settings.insecure_open:
            await ensure_admin_key(self.keys, self.settings.home)
        watch(await self.notifier.start(), "the event listener (LISTEN, cache invalidation)")
        self._stack.push_async_callback(self.notifier.stop)
        if self.model is not None:
            self._stack.push_async_callback(self.model.close)
        self._stack.push_async_callback(self.webhooks.aclose)
        self._stack.push_async_callback(self.peers.aclose)
        await self.engine.launch()
        self._stack.push_async_callback(self.engine.shutdown)
        if self.settings.run_worker and self.settings.push_delivery == "inline":
            pusher = asyncio.create_task(self.deliverer.run_forever(), name="push-deliverer")
            watch(pusher, "the push deliverer")
            self._stack.push_async_callback(_cancelled, pusher)
        freeze_startup_objects()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def health(self) -> Health:
        database = await self.database.ping()
        schema_current = heartbeat_fresh = False
        if database:
            try:
                schema_current = await self.database.schema_version() == latest_version()
                heartbeat_fresh = await self.registry.is_fresh()
            except StoreError:
                database = False
        return Health(
            database=database, schema_current=schema_current, heartbeat_fresh=heartbeat_fresh
        )


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def source_rules(settings: Settings) -> SourceRules:
    """Where a task's workspace may come from and its commits go (the edge and the harness
    check the same rules)."""
    return SourceRules(
        allowed_prefixes=settings.git_allowed_urls,
        credentials=settings.git_credentials,
        allow_hosts=AllowList.parse(settings.push_allow_hosts),
    )
