"""The memory-management benchmark: ``memsdk eval manage``.

Short multi-session conversations with gold final states (`scenarios`), ingested through a
real `MemoryClient` and scored per event class (`metrics`, `runner`): forget honoured in
every tier, superseded facts retired from the current view, compatible facts kept,
duplicates not added, false deletions, and current- and previous-state answers.

    memsdk eval manage --split val --policies heuristic --answerer extractive
    memsdk eval manage --split train --pairs-out build/pairs-train.jsonl

    from memsdk.eval.manage import generate, pairs
    val = generate("val")                 # 40 scenarios, the same every time
"""

from memsdk.eval.manage.scenarios import EVENT_CLASSES, PAIR_LABELS, Episode, Fact, Pair, Question, Scenario, ScenarioTurn, demo_scenario, generate, pairs, scenarios, write_pairs

__all__ = ["EVENT_CLASSES", "PAIR_LABELS", "Episode", "Fact", "Pair", "Question", "Scenario", "ScenarioTurn", "demo_scenario", "generate", "pairs", "scenarios", "write_pairs"]
