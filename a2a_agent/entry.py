"""The `a2a-agent` command. The client's commands (`send`, `tasks`) talk to a running server
and need nothing of it: they start without importing the server (0.4 s instead of 4.7 s, the
server's stack being uvicorn, DBOS and SQLAlchemy); every other command is the server's."""

from __future__ import annotations

import argparse
import os
import sys

from a2a_agent import client_commands

# What a shell shows for a command killed by SIGPIPE (128 + 13): its reader went away.
STDOUT_CLOSED = 141


def main(argv: list[str] | None = None) -> int:
    """Run the command; when its reader stops reading (`a2a-agent tasks list | head -1`),
    end quietly, as a command killed by SIGPIPE would: nothing is wrong with the server."""
    try:
        try:
            return _main(argv)
        finally:
            # Here, not at the interpreter's exit, where a failed flush prints "Exception
            # ignored ... BrokenPipeError" (and replaces a SystemExit from --help, say).
            sys.stdout.flush()
    except BrokenPipeError:
        # Python's recipe (the signal module's docs): what is still buffered goes nowhere,
        # so the interpreter's own flush at exit finds nothing to complain of.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return STDOUT_CLOSED


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in client_commands.COMMANDS:
        from a2a_agent import client_cli  # noqa: PLC0415 (the point: only this)

        parser = argparse.ArgumentParser(prog="a2a-agent")
        client_commands.add_commands(parser.add_subparsers(dest="command", required=True))
        return client_cli.run(parser.parse_args(args))
    from a2a_agent.cli import main as server_main  # noqa: PLC0415

    return server_main(args)
