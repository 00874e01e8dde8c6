from __future__ import annotations

import sys

from a2a_agent.entry import main

sys.exit(main())
