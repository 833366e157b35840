"""The release gate: a checkpoint serves only when it beats the version serving now.

    stats.py     the paired comparison and the decision (`decide`, `decide_pooled`, `GateDecision`)
    states.py    the fixed states a comparison replays, and where they come from
    replay.py    one version replayed over those states: a reward per state, and its cost
    release.py   states -> both versions replayed -> decision; what the clients call

The clients' ``evaluate_policy`` / ``promote`` delegate here and record the decision beside
the candidate's manifest (`PolicyRegistry.record_decision`).
"""

from memsdk.gate.release import GateStates, acompare, compare, label, states
from memsdk.gate.replay import ManagerReplay, areplay_answerer, areplay_manager, replay_answerer, replay_manager
from memsdk.gate.states import AnswerCase, ManagerCase, answer_cases, judged_gold, load_answer_cases, locomo_answer_cases, log_answer_cases, log_manager_cases
from memsdk.gate.stats import GateConfig, GateDecision, GateFailed, Guard, Paired, SideResult, SourceCheck, decide, decide_pooled, paired_comparison

__all__ = [
    "GateStates", "compare", "acompare", "label", "states", "ManagerReplay", "replay_answerer", "areplay_answerer", "replay_manager", "areplay_manager",
    "AnswerCase", "ManagerCase", "answer_cases", "judged_gold", "load_answer_cases", "locomo_answer_cases", "log_answer_cases", "log_manager_cases",
    "GateConfig", "GateDecision", "GateFailed", "Guard", "Paired", "SideResult", "SourceCheck", "decide", "decide_pooled", "paired_comparison",
]  # fmt: skip
