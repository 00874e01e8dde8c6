from __future__ import annotations

import sys

from a2a_agent.cli import main

sys.exit(main())
