"""The memory bank: one transition function over scoped records with a durable audit history."""

from memsdk.bank.bank import MemoryBank, as_memory_id, as_query, as_scope
from memsdk.bank.history import history_violations, replay, versions
from memsdk.bank.snapshot import BankSnapshot
from memsdk.bank.transition import BankLimits, Change, Transition, plan, plan_restore

__all__ = ["MemoryBank", "BankSnapshot", "BankLimits", "Change", "Transition", "plan", "plan_restore", "as_scope", "as_memory_id", "as_query", "history_violations", "replay", "versions"]
