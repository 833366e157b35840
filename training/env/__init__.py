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
deltamem_targets  DeltaMem's (turns, bank before, target bank after) triples: from a teacher's
             run through the client, from an app's hand corrections in the interaction log
deltamem_env DeltaMem: the runtime's DeltaMem ingest over a fork, format / retrieval / state F1
memagent_env MemAgent: a document read chunk by chunk by the runtime's reader, answered from
             the final memory, equivalence / coverage rewards (`memagent_env`, imported by name)
"""

from .answering import Metric, QAOutcome, answer_questions, mean_score, sample_qa
from .episodes import Episode, EpisodeConfig, EpisodeRollout, EpisodeRunner, Session, SessionOutcome, chunks, sample_episode_qa, word_count
from .from_log import log_states, manager_states
from .deltamem_targets import TargetTriple, correction_triples, heuristic_teacher, llm_teacher, locomo_triples, teacher_triples
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
    "TargetTriple",
    "answer_questions",
    "heuristic_teacher",
    "log_states",
    "manager_states",
    "llm_teacher",
    "apply_ops",
    "chunks",
    "conversation",
    "correction_triples",
    "locomo_episode",
    "locomo_path",
    "locomo_qa",
    "locomo_sessions",
    "locomo_states",
    "locomo_triples",
    "mean_score",
    "retrieve_related",
    "sample_episode_qa",
    "sample_ids",
    "sample_qa",
    "session_date",
    "split_of",
    "teacher_triples",
    "word_count",
]
