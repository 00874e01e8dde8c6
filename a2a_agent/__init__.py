"""a2a-agent: a durable A2A 1.0 service that works plans item by item."""

from __future__ import annotations

__version__ = "0.1.0"
