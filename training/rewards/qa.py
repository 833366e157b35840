"""Answer-quality rewards: exact match, token F1 and BLEU-1.

They live in `memsdk.eval.scoring`, which the evaluation harness reports with, so that a
reward and the number reported on LoCoMo are one implementation; this module keeps the
names the trainer imports.
"""

from memsdk.eval.scoring import answer_tokens, bleu1, exact_match, normalize_answer, token_f1

__all__ = ["normalize_answer", "answer_tokens", "exact_match", "token_f1", "bleu1"]
