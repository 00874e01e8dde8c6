"""Other projects' A2A clients against real `a2a-agent serve` processes (see docs/clients.md)."""
