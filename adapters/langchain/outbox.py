"""The middleware's outbox is the runtime's (`memsdk.outbox`): `memsdk serve` queues its
accepted ingests in the same one. Kept here so imports from before the move still work."""

from memsdk.outbox import SEEN_DAYS, DeadLetter, Outbox, QueueFull

__all__ = ["Outbox", "QueueFull", "DeadLetter", "SEEN_DAYS"]
