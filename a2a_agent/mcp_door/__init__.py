"""The MCP door: delegation for clients that speak MCP (coding agents), on the same runs."""
