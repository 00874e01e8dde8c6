"""The error root of the a2a_agent package; A2A protocol errors are made only at the edge."""

from __future__ import annotations


class AgentError(Exception):
    """Root of every error a2a_agent raises on purpose."""


class ConfigError(AgentError):
    """A setting is missing or malformed; the message names it."""


class PlanError(AgentError):
    """A caller's plan or message is invalid; the message says what to change."""


class MessageTooLarge(AgentError):
    """A message is larger than the configured limit."""


class ContentTypeError(AgentError):
    """A message carries content of a type the agent does not accept."""


class TaskStopped(AgentError):
    """The task reached a terminal state (canceled, failed) while a step was running."""


class ModelError(AgentError):
    """The model could not be called (after the SDK's own retries), or said something unusable."""
