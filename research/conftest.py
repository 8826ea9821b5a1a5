"""The research wing's tests (`make test-research`) use the suite's session checkpoints."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import *  # noqa: E402,F403  (fixtures are found by name in this module)
