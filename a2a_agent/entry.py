"""The `a2a-agent` command. The client's commands (`send`, `tasks`) talk to a running server
and need nothing of it: they start without importing the server (0.4 s instead of 4.7 s, the
server's stack being uvicorn, DBOS and SQLAlchemy); every other command is the server's."""

from __future__ import annotations

import argparse
import sys

from a2a_agent import client_commands


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in client_commands.COMMANDS:
        from a2a_agent import client_cli  # noqa: PLC0415 (the point: only this)

        parser = argparse.ArgumentParser(prog="a2a-agent")
        client_commands.add_commands(parser.add_subparsers(dest="command", required=True))
        return client_cli.run(parser.parse_args(args))
    from a2a_agent.cli import main as server_main  # noqa: PLC0415

    return server_main(args)
