"""The repository's folders as the tests reach them: named once here, so that a test file can move between
package folders without counting `parents[...]` again."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "tests" / "events"   # saved API Gateway and Lambda events
GOLDENS = ROOT / "goldens"
