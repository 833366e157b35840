"""The memory environment: states, rollouts and rewards over the runtime's own bank and policies.

state        MemoryState (snapshot, new facts, linked QA)
answering    the frozen answerer over a bank -> per-question outcomes scored by `rewards.qa`,
             QA subsets per group
manager_env  Memory-R1: parse a manager output, MemoryBank.apply on a fork, reward; GRPO groups
episodes     Memory-R2: chunked sessions, extractor + manager on one backbone, session rewards,
             re-rolls from anchor states at the training temperature
locomo       LoCoMo per-turn states and session episodes, split_of (conv-26 / conv-30 / rest)
from_log     states from a client's interaction log and feedback, banks as of each ingest
writer_env   Mem-alpha: the writer's rollouts through the runtime's write_steps, per-step rewards
"""

from .answering import Metric, QAOutcome, answer_questions, mean_score, sample_qa
from .episodes import Episode, EpisodeConfig, EpisodeRollout, EpisodeRunner, Session, SessionOutcome, chunks, sample_episode_qa, word_count
from .from_log import log_states
from .locomo import Split, conversation, locomo_episode, locomo_path, locomo_qa, locomo_sessions, locomo_states, sample_ids, session_date, split_of
from .manager_env import EnvConfig, Group, ManagerEnv, Observation, Rollout, StepResult, apply_ops, retrieve_related
from .state import MemoryState, QAItem

__all__ = [
    "EnvConfig",
    "Episode",
    "EpisodeConfig",
    "EpisodeRollout",
    "EpisodeRunner",
    "Group",
    "ManagerEnv",
    "MemoryState",
    "Metric",
    "Observation",
    "QAItem",
    "QAOutcome",
    "Rollout",
    "Session",
    "SessionOutcome",
    "Split",
    "StepResult",
    "answer_questions",
    "log_states",
    "apply_ops",
    "chunks",
    "conversation",
    "locomo_episode",
    "locomo_path",
    "locomo_qa",
    "locomo_sessions",
    "locomo_states",
    "mean_score",
    "retrieve_related",
    "sample_episode_qa",
    "sample_ids",
    "sample_qa",
    "session_date",
    "split_of",
    "word_count",
]
