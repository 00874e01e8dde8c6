"""Settings, read once from the environment into typed sections.

Each section is a frozen dataclass for the part of the service it feeds (the HTTP server,
the database, the worker, the sandboxed commands, the model, ...). A field read from the
environment is declared with `setting(VARIABLE, default, how)`: the variable's name sits
beside the field, and the dataclass default is the fallback when the variable is unset, so
every default is written once. `Settings.from_env` reads every section through that table;
docs/settings.md lists the same table (tests/test_settings.py holds the two equal).

The package, in reading order: `reading.py` (`setting`, the `How` of each kind of value, the
reading of a section), `sections.py` (the sections), `service.py` (`Settings`, the table of
variables, the constants beside them).
"""

from a2a_agent.settings.reading import defaults
from a2a_agent.settings.sections import DEFAULT_IRREVERSIBLE, PACKAGED_CARD, SECTIONS
from a2a_agent.settings.service import (
    APPLICATION_VERSION,
    FLAT_NAMES,
    Settings,
    Variable,
    variables,
)

__all__ = [
    "APPLICATION_VERSION",
    "DEFAULT_IRREVERSIBLE",
    "FLAT_NAMES",
    "PACKAGED_CARD",
    "SECTIONS",
    "Settings",
    "Variable",
    "defaults",
    "variables",
]
