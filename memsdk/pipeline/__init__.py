"""The ingest and answer pipelines, written once for every driver.

Each pipeline is a generator that *yields effects* (`memsdk.effects`: search, apply, and the
policies' own `Chat` requests and `Call`s, yielded from their ``steps``) and receives their
results; it does no I/O itself, and neither do the policies. `memsdk.effects.Runner` carries
the effects out, blocking or awaited, for both clients, the trainers and the release gate,
so none of them can drift from the others. An effect that fails is thrown back into the
generator, which decides whether the failure costs the turn (a dead store does), only that
fact, or the role's fallback decides instead (`decide_with_fallback`: a dead backend).

    ingest.py      a turn kept verbatim, forgets and corrections, extractor -> manager -> apply
    retrieval.py   what an answer is shown: tiers fused by rank, neighbouring turns
    decisions.py   a policy's decision as effects, with the role's fallback
"""

from memsdk.pipeline.decisions import ActivePolicies, decide_with_fallback
from memsdk.pipeline.ingest import IngestOutcome, WriteOutcome, core_steps, ingest_steps, related_steps, write_steps
from memsdk.pipeline.retrieval import AnswerOutcome, answer_steps, retrieve_steps

__all__ = [
    "ActivePolicies", "decide_with_fallback", "IngestOutcome", "WriteOutcome", "AnswerOutcome",
    "ingest_steps", "write_steps", "related_steps", "core_steps", "answer_steps", "retrieve_steps",
]  # fmt: skip
