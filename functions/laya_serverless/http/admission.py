"""Who may be read, and who may be decided: the reading gate and the admission slots.

A decision request's body is read *before* it takes an admission slot, so a client still
sending its body never holds one: 16 slow clients cannot starve the server for the body
deadline. Reading is bounded instead by the reading gate: at most `READERS_PER_SLOT` readers
per admission slot in all (each body is capped at 2 MiB and at the body deadline, so memory
held by readers is bounded), and, once readers outnumber the admission slots, at most
`per_client` at once from one client address. While slots are free nobody waits on anybody, so
one pooled client (many connections, one address) is never refused for its own concurrency; a
client that holds many slow reads is capped as soon as the others would have to wait. Both
gates refuse at once (503, `Retry-After: 1`), as admission does; neither queues. The address is
the connection's peer: proxy headers are not trusted by the local server (`server.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import Overloaded

READERS_PER_SLOT = 4
BUSY = "server busy, try again later"


class ReadingGate:
    """Non-blocking counting gate over concurrent body reads, in total and per client address."""

    def __init__(self, total: int, per_client: int, slots: int = 0) -> None:
        if total < 1 or per_client < 1:
            raise ValueError("a reading gate needs room for at least one reader, got %d / %d" % (total, per_client))
        self.total, self.per_client = total, per_client
        self.slots = slots  # readers up to this many in all are never refused per client (0: always per client)
        self.reading: dict[str, int] = {}

    @property
    def in_use(self) -> int:
        return sum(self.reading.values())

    @contextmanager
    def reading_for(self, client: str) -> Iterator[None]:
        """Hold one reading place for `client` (its address), or refuse with `Overloaded`."""
        in_use = self.in_use
        if in_use >= self.total or (in_use >= self.slots and self.reading.get(client, 0) >= self.per_client):
            raise Overloaded(BUSY)
        self.reading[client] = self.reading.get(client, 0) + 1
        try:
            yield
        finally:
            left = self.reading[client] - 1
            if left:
                self.reading[client] = left
            else:
                del self.reading[client]
