"""Where the build side keeps what it makes, relative to the working directory (the checkout, for `make`)."""

from __future__ import annotations

from pathlib import Path

BUILD_CACHE = Path(".cache")   # checkpoints, goldens, artifacts, search records, the serving cache: gitignored
