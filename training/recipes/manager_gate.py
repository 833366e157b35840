"""The release gate for a pair manager over every val source at once, with a per-source guard
(`memsdk.gate.decide_pooled`).

    python -m memsdk_training.recipes.manager_gate --candidate pairs-v6 --incumbent pairs-v5 \\
        --manage CAND/report.json INC/report.json --locomo CAND/report.json INC/report.json \\
        [--written-config training/configs/pairs_cross_v6.yaml] [--write gate.json]

One generator's val split cannot say whether a manager learned people's words or the
generator's, so the decision pools three sources, each paired state by state:

    generator val   `memsdk eval manage --split val` of both managers: a scenario's reward is
                    the share of its facts that ended right (`eval.manage.gate.side`), with
                    the false-deletion guard
    written val     the val part of the pairs written outside the team (their attributes never
                    in training): 1 where the manager's retirement decision is the gold's
                    (retire a superseded or corrected memory, keep any other), else 0
    LoCoMo val      `memsdk eval locomo --split val` of both managers: a question's evidence
                    recall@10 (what managing a real chat did to retrieval)

Both managers are served as shipped (`PairManager.load` of their packaged folders, each at its
own thresholds). Only val data is read; nothing here is tuned.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memsdk.eval.manage.gate import side
from memsdk.eval.manage.results import ManageReport
from memsdk.eval.results import RunReport
from memsdk.gate import GateDecision, SideResult, decide_pooled
from memsdk.policies.cross_encoder import acting
from memsdk.policies.pair_manager import PairManager
from memsdk.policies.relations import Relation, relation_text
from memsdk.registry import PACKAGED_DIR

from .cross_encoder import CrossEncoderConfig
from .pair_classifier import cli_config
from .written_pairs import WrittenPair, read_written, split_by_attribute

__all__ = ["retirements", "written_side", "locomo_side", "manager_gate", "main"]

#: the recall cutoff a LoCoMo question's state is scored at
RECALL_K = 10
_RETIRING = (Relation.SUPERSEDES, Relation.CORRECTS)


def retirements(probs: np.ndarray, manager: PairManager) -> np.ndarray:
    """[n] bool: where ``manager`` retires the old memory of each pair shown alone (its rule:
    a duplicate or a forget request retires nothing, else supersedes + corrects at its threshold)."""
    t = manager.thresholds
    act = acting(probs)
    return (act[:, 0] >= t.supersede_at) & (act[:, 1] < t.duplicate_at) & (act[:, 2] < t.forget_at)


def written_side(manager: PairManager, pairs: Sequence[WrittenPair]) -> SideResult:
    """The written val source for one manager: a reward per pair (module docstring)."""
    new, old = [p.new for p in pairs], [p.old for p in pairs]
    vectors = manager.embedder.embed([relation_text(t) for t in [*new, *old]])
    probs = manager.classifier.predict_pairs(new, old, vectors[: len(new)], vectors[len(new) :])
    right = retirements(probs, manager) == np.array([p.label in _RETIRING for p in pairs])
    return SideResult(version=manager.version, rewards=right.astype(float).tolist())


def locomo_side(report: RunReport, version: str) -> SideResult:
    """The LoCoMo source for ``version``'s run: recall@`RECALL_K` per question with evidence."""
    recall = [r for c in report.conversations for q in c.questions if (r := q.recall.get(RECALL_K)) is not None]
    return SideResult(version=version, rewards=recall)


def manager_gate(candidate: str, incumbent: str, *, manage: tuple[Path, Path], locomo: tuple[Path, Path], written: Sequence[WrittenPair]) -> GateDecision:
    """The pooled decision for the packaged ``candidate`` against ``incumbent`` (module docstring)."""
    managers = [PairManager.load(PACKAGED_DIR / "manager" / v) for v in (candidate, incumbent)]
    runs = [ManageReport.model_validate_json(p.read_text(encoding="utf-8")) for p in manage]
    chats = [RunReport.model_validate_json(p.read_text(encoding="utf-8")) for p in locomo]
    if [s.id for s in runs[0].scenarios] != [s.id for s in runs[1].scenarios]:
        raise ValueError("the two management runs are not of the same scenarios")
    sides = {
        "generator val": (side(runs[0]), side(runs[1])),
        "written val": (written_side(managers[0], written), written_side(managers[1], written)),
        "LoCoMo val recall@10": (locomo_side(chats[0], candidate), locomo_side(chats[1], incumbent)),
    }
    return decide_pooled("manager", sides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsdk_training.recipes.manager_gate", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--candidate", required=True, help="a packaged manager version (pairs-v6)")
    parser.add_argument("--incumbent", required=True, help="the packaged manager serving now (pairs-v5)")
    parser.add_argument("--manage", type=Path, nargs=2, required=True, metavar=("CANDIDATE", "INCUMBENT"), help="report.json of each manager's `memsdk eval manage --split val`")
    parser.add_argument("--locomo", type=Path, nargs=2, required=True, metavar=("CANDIDATE", "INCUMBENT"), help="report.json of each manager's `memsdk eval locomo --split val`")
    parser.add_argument("--written-config", default="training/configs/pairs_cross_v6.yaml", help="the config whose written pairs and split give the val part")
    parser.add_argument("--write", type=Path, help="write the decision (gate.json) here")
    args = parser.parse_args(argv)
    cfg = cli_config(CrossEncoderConfig, {"config": args.written_config})
    written = split_by_attribute(read_written(cfg.written_pairs), *cfg.written_split)[1]
    decision = manager_gate(args.candidate, args.incumbent, manage=tuple(args.manage), locomo=tuple(args.locomo), written=written)
    lines = [decision.summary(), "", "| source | n | candidate | incumbent | mean diff | 95% interval | win / tie / loss | ok |", "|---|---|---|---|---|---|---|---|"]
    for check in decision.sources:
        p = check.paired
        means = decision.candidate.metrics[f"{check.source}/mean"], decision.incumbent.metrics[f"{check.source}/mean"]
        lines.append(f"| {check.source} | {p.n} | {means[0]:.3f} | {means[1]:.3f} | {p.mean_diff:+.3f} | [{p.ci_low:+.3f}, {p.ci_high:+.3f}] | {p.wins} / {p.ties} / {p.losses} | {'yes' if check.ok else 'NO'} |")
    sys.stdout.write("\n".join(lines) + "\n")
    if args.write is not None:
        args.write.write_text(decision.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
