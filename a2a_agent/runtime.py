"""The runtime: one object that opens and closes everything a process needs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType

from a2a_agent.budget import BudgetGuard
from a2a_agent.database import embedded_gone, sqlalchemy_url
from a2a_agent.delivery.deliverer import PushDeliverer
from a2a_agent.delivery.guard import AllowList
from a2a_agent.delivery.process import delivery_config
from a2a_agent.delivery.signing import Signer
from a2a_agent.delivery.transport import WebhookClient
from a2a_agent.edge.admin_key import ensure_admin_key
from a2a_agent.engine import LaunchedEngine
from a2a_agent.engine.dbos_engine import DbosEngine
from a2a_agent.engine.peer_watch import PeerWatch
from a2a_agent.engine.retention import Retention
from a2a_agent.harness.checks.decisions import DecisionSteps
from a2a_agent.harness.checks.facts import FactSteps
from a2a_agent.harness.checks.plan_harness import PlanHarness
from a2a_agent.harness.delegation.delegator import Delegator
from a2a_agent.harness.delegation.handover import DelegationConfig
from a2a_agent.harness.kernel.context import HarnessConfig, StepContext
from a2a_agent.harness.kernel.effects import Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.pauses import PauseConfig, Pauses, compile_patterns
from a2a_agent.harness.model.model_work import ModelConfig, ModelWork
from a2a_agent.harness.workspace.git_remote import GitRemote
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.harness.workspace.unpack import Limits
from a2a_agent.liveness import mark_alive
from a2a_agent.model import ModelClient
from a2a_agent.model.gated import GatedModel
from a2a_agent.observe import tracing
from a2a_agent.peers import PeerClient
from a2a_agent.plans import PlanLimits
from a2a_agent.settings import APPLICATION_VERSION, Settings
from a2a_agent.slots import Slots, StepSlots
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
from persistence.starts import PostgresStartStore
from persistence.steps import PostgresStepResults
from persistence.tasks import PostgresTaskStore
from persistence.watch import PostgresWatchdogStore
from persistence.workers import WorkerIdentity, WorkerRegistry


def plan_limits(settings: Settings) -> PlanLimits:
    return PlanLimits(
        max_items=settings.intake.max_plan_items,
        default_max_attempts=settings.intake.default_max_attempts,
        default_verify_timeout_s=settings.commands.verify_timeout_s,
        max_verify_timeout_s=settings.commands.timeout_s,
        peers=frozenset(settings.peers.agents),
    )


def harness_config(settings: Settings, sandbox: Sandbox) -> HarnessConfig:
    """What every step of the harness shares from the settings."""
    commands, intake = settings.commands, settings.intake
    return HarnessConfig(
        workspaces=settings.workspaces,
        command_env=commands.env,
        command_timeout_s=commands.timeout_s,
        output_tail_bytes=commands.output_tail_bytes,
        executor_id=settings.worker.executor_id,
        sandbox=sandbox,
        reverify_parallelism=commands.reverify_parallelism,
        remote=GitRemote(source_rules(settings), sandbox, timeout_s=commands.clone_timeout_s),
        unpack=Limits(intake.max_input_files, intake.max_unpacked_bytes),
        max_download_bytes=intake.max_input_bytes,
        public_url=settings.server.url,
        inline_output_bytes=intake.inline_output_bytes,
        fault_file=settings.fault_file,
        command_slots=Slots("commands", commands.slots, lease_s=commands.slot_s),
        step_slots=StepSlots(settings.worker.step_slots),
    )


def model_client(settings: Settings) -> ModelClient | None:
    """The model, or None without an API key (text goals and model items are then refused).
    The SDK is imported only then: it is half of a process's start-up (about 2 s of CPU)."""
    model = settings.model
    if not model.api_key:
        return None
    from a2a_agent.model.anthropic_adapter import AnthropicModel  # noqa: PLC0415

    slots = Slots("model calls", model.concurrency)
    inner = AnthropicModel(
        api_key=model.api_key,
        model=model.name,
        base_url=model.base_url,
        timeout_s=model.timeout_s,
        max_retries=model.max_retries,
        max_connections=model.concurrency,
        rate_limited=slots.pause,
    )
    return GatedModel(inner, slots)


def model_config(settings: Settings) -> ModelConfig:
    model = settings.model
    return ModelConfig(
        max_tokens=model.max_tokens,
        min_output_tokens=model.min_tokens,
        compact_at_tokens=model.compact_at_tokens,
        max_turns=model.max_turns,
        plan_tries=model.plan_tries,
        tool_output_bytes=model.tool_output_bytes,
        bash_timeout_s=settings.commands.timeout_s,
        plan_limits=plan_limits(settings),
        repo_context_tokens=model.repo_context_tokens,
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

    def __init__(
        self,
        settings: Settings,
        conninfo: str,
        *,
        role: str,
        engine: Callable[[Runtime], LaunchedEngine] | None = None,
    ) -> None:
        """`engine`: made from the runtime instead of DBOS (the in-process tests' recording
        fake); such a runtime also leaves the garbage collector as it is.

        Everything is built in dependency order, each object from what is built above it:
        the database, the stores, push delivery, the model and peer clients, the harness
        kernel, the delegator, the harness steps that hand work to it, the peer watch, the
        engine."""
        self.settings = settings
        self._own_process = engine is None
        self.conninfo = conninfo
        self.role = role

        # The database: one pool, the read cache NOTIFY (through the notifier) keeps honest.
        self.pool = create_pool(conninfo, max_size=settings.database.pool_max)
        self.read_cache = TaskReadCache()
        self.notifier = TaskNotifier(
            conninfo, self.read_cache, tick=FaultPoint(settings.fault_file, "notifier")
        )
        self.database = DatabaseHealth(self.pool)
        self.secrets = SecretBox.from_settings(settings.push.secret_key, settings.home)

        # The stores, by who uses them.
        self.store = PostgresTaskStore(self.pool, self.read_cache)
        self.runs = PostgresRunStore(self.pool, self.read_cache)
        self.replies = PostgresReplyStore(self.pool, self.read_cache)
        self.ledger = PostgresLedger(self.pool)
        self.budgets = PostgresBudgets(self.pool)
        self.push = PostgresPushStore(self.pool, self.secrets)
        self.keys = PostgresKeyStore(self.pool)
        self.delegations = PostgresDelegationStore(self.pool)
        self.registry = WorkerRegistry(
            self.pool,
            WorkerIdentity(
                executor_id=settings.worker.executor_id,
                role=role,
                host=socket.gethostname(),
                pid=os.getpid(),
            ),
            timeout_s=settings.worker.heartbeat_timeout_s,
        )

        # Push notifications: the guard, the client it guards, the signer, the deliverer.
        self.allow = AllowList.parse(settings.push.allow_hosts)
        self.webhooks = WebhookClient(self.allow)
        self.signer = Signer(settings.server.url)
        self.deliverer = PushDeliverer(
            self.push,
            self.notifier,
            config=delivery_config(settings),
            client=self.webhooks,
            signer=self.signer,
        )

        # Clients of what is outside: the model (if configured) and peer agents.
        self.model = model_client(settings)
        self.peers = PeerClient(settings.peers.agents)

        # The harness kernel: the box, the step context, the ways a run ends, pauses, effects.
        self.sandbox = Sandbox(
            enabled=settings.commands.sandbox,
            network=settings.commands.network,
            hidden=(settings.home, Path.home()),
            shared=settings.commands.shared,
        )
        self.guard = BudgetGuard(
            self.budgets, pause_pct=settings.budget.pause_pct, prices=settings.budget.prices
        )
        self.context = StepContext(
            self.runs, self.ledger, self.guard, harness_config(settings, self.sandbox)
        )
        endings = RunEndings(self.context)
        pauses = Pauses(
            self.context,
            PauseConfig(
                expires_s=settings.policy.approval_expires_s,
                irreversible=compile_patterns(settings.policy.irreversible_patterns),
                pause_pct=settings.budget.pause_pct,
            ),
        )
        self.effects = Effects(self.context, endings, self.notifier, pauses)

        # Delegation needs only the kernel and the stores, so it comes before the steps that
        # hand work to it.
        self.delegator = Delegator(
            self.context,
            self.effects,
            children=self.store,
            store=self.delegations,
            peers=self.peers,
            config=DelegationConfig(
                plan_limits=plan_limits(settings),
                budget_defaults=settings.budget.defaults,
                budget_caps=settings.budget.caps,
                policy_defaults=settings.policy.defaults(),
                public_url=settings.server.url,
                tag=self.secrets.tag,
            ),
        )

        # The plan's steps.
        self.harness = PlanHarness(self.context, self.effects, endings)
        self.decisions = DecisionSteps(self.context, endings, pauses, delegator=self.delegator)
        self.work = ModelWork(
            self.context,
            self.effects,
            self.model,
            model_config(settings),
            delegator=self.delegator,
        )

        # A genuine cycle: the peer watch starts a run's next segment through the engine, and
        # the engine's supervisor polls the peer watch; the lambda reads the engine when a
        # peer's task ends, long after both are built.
        self.peer_watch = PeerWatch(
            self.delegations,
            self.peers,
            lambda task_id, segment: self.engine.start(task_id, segment),  # noqa: PLW0108 (made below)
            poll_s=settings.peers.poll_s,
        )
        self.engine: LaunchedEngine = engine(self) if engine is not None else self._dbos_engine()
        self._stack = AsyncExitStack()

    def _dbos_engine(self) -> DbosEngine:
        settings, conninfo = self.settings, self.conninfo
        return DbosEngine(
            store=PostgresWatchdogStore(self.pool),
            starts=PostgresStartStore(self.pool),
            step_results=PostgresStepResults(self.pool),
            harness=self.harness,
            work=self.work,
            decisions=self.decisions,
            facts=FactSteps(self.context, self.effects),
            delegator=self.delegator,
            watch_peers=self.peer_watch.poll if settings.peers.agents else None,
            replies=self.replies,
            registry=self.registry,
            system_database_url=sqlalchemy_url(conninfo),
            conninfo=conninfo,
            engine_pool_max=settings.database.pool_max,
            stalled_after_s=settings.worker.heartbeat_timeout_s,
            application_version=APPLICATION_VERSION,
            run_worker=settings.worker.run_worker,
            worker_concurrency=settings.worker.concurrency,
            reconcile_interval_s=settings.worker.reconcile_interval_s,
            queue_poll_s=settings.worker.queue_poll_s,
            shutdown_grace_s=settings.worker.shutdown_grace_s,
            stuck_after_s=settings.worker.stuck_after_s,
            max_run_age_s=settings.worker.max_run_age_s,
            retention=Retention(
                workspaces=settings.workspaces,
                push_s=settings.retention.push_s,
                task_s=settings.retention.task_s,
                record_s=settings.retention.record_s,
            ),
            fault=FaultPoint(settings.fault_file, "supervisor"),
            alive=partial(mark_alive, settings.home, settings.worker.executor_id),
            database_gone=(
                (lambda: None)
                if settings.database.url
                else partial(embedded_gone, settings.home / "pgdata")
            ),
        )

    async def __aenter__(self) -> Runtime:
        if self.settings.worker.run_worker:
            self.sandbox.check()
        # Per process (a forked child sets up its own): the exporter OTEL_* names, if any.
        if tracing.configure(self.settings.worker.executor_id):
            self._stack.callback(tracing.shutdown)
        await migrate(self.conninfo)
        self.settings.workspaces.mkdir(parents=True, exist_ok=True)
        await self.pool.open(wait=True, timeout=30)
        self._stack.push_async_callback(self.pool.close)
        await self.signer.load(self.push)
        if self.role == "serve" and not self.settings.server.insecure_open:
            await ensure_admin_key(self.keys, self.settings.home)
        watch(await self.notifier.start(), "the event listener (LISTEN, cache invalidation)")
        self._stack.push_async_callback(self.notifier.stop)
        if self.model is not None:
            self._stack.push_async_callback(self.model.close)
        self._stack.push_async_callback(self.webhooks.aclose)
        self._stack.push_async_callback(self.peers.aclose)
        await self.engine.launch()
        self._stack.push_async_callback(self.engine.shutdown)
        if self.settings.worker.run_worker and self.settings.push.delivery == "inline":
            pusher = asyncio.create_task(self.deliverer.run_forever(), name="push-deliverer")
            watch(pusher, "the push deliverer")
            self._stack.push_async_callback(_cancelled, pusher)
        if self._own_process:
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
        allowed_prefixes=settings.commands.git_allowed_urls,
        credentials=settings.commands.git_credentials,
        allow_hosts=AllowList.parse(settings.push.allow_hosts),
    )
