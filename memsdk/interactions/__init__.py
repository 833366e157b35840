"""The interaction log: every ingest and answer as a trajectory, the input of training/."""

from memsdk.interactions.sqlite import InteractionLog, Redactor
from memsdk.interactions.types import AppliedOp, Feedback, Trajectory

__all__ = ["AppliedOp", "Feedback", "InteractionLog", "Redactor", "Trajectory"]
