"""A tiny randomly initialised Llama with a hand-built word-level vocabulary, saved as a
transformers folder, and a synthetic memory task whose right op is fixed by construction.

The vocabulary is small on purpose: a random model starts near uniform over it, so the
right op word is sampled now and then (~1/|V|) and GRPO has signal to start from; with
SmolLM2's 49k tokens a random model would essentially never emit it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from typing import Any

from memsdk.llm.base import SamplingParams
from memsdk.llm.inprocess import render
from memsdk.llm.transformers_backend import TransformersBackend
from memsdk_training.advantages import GroupedAdvantages
from memsdk_training.recipes import GroupLearner, LoRASettings, Recipe, RecipeConfig, RecipeData, Sampled, SampledGroup

def run_recipe(cls: Any, config: Any) -> list[dict]:
    """setup -> train -> cleanup; the metrics rows of the run."""
    recipe = cls(config)
    recipe.setup()
    try:
        return recipe.train()
    finally:
        recipe.cleanup()


def mean_of(rows: list[dict], key: str = "reward_mean") -> float:
    return sum(r[key] for r in rows) / len(rows)


class ZeroAdvantages(GroupLearner):
    """GRPO, except that every advantage is 0: the control of a learning test (only the KL
    term, zero at the start, is left, so nothing should be learned)."""

    def advantages(self, groups: Sequence[SampledGroup]) -> GroupedAdvantages:
        import torch

        adv = super().advantages(groups)
        return adv._replace(advantages=torch.zeros_like(adv.advantages))


SPECIAL = ["<pad>", "<unk>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>"]
OPS = ["ADD", "UPDATE", "DELETE", "NOOP"]
# the relation between the new fact and the stored memory decides the op
RELATION_OP = {"none": "ADD", "changed": "UPDATE", "wrong": "DELETE", "same": "NOOP"}
ENTITIES = ["alice", "bob", "dog", "cat", "tea", "paris"]
WORDS = ["fact", "memory", "op", "likes", "is", *RELATION_OP, *ENTITIES]
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def _word_llama(words: Sequence[str], *, seed: int, max_positions: int, metaspace: bool = False) -> tuple[Any, Any, dict[str, int]]:
    """A randomly initialised 2-layer Llama over a word-level vocabulary: (model, tokenizer, vocab).

    ``metaspace``: words carry their leading space as "▁" and decode with it; otherwise words
    are split on whitespace.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    if metaspace:
        core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        core.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    else:
        core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    tokenizer.chat_template = TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=max_positions, pad_token_id=vocab["<pad>"], eos_token_id=vocab["<eos>"],
        bos_token_id=None, tie_word_embeddings=False,
    )  # fmt: skip
    return LlamaForCausalLM(config), tokenizer, vocab


def make_tiny_model(folder: Path, *, seed: int = 0, extra_words: Sequence[str] = ()) -> Path:
    model, tokenizer, vocab = _word_llama([*SPECIAL, *OPS, *WORDS, *extra_words], seed=seed, max_positions=1024)
    model.generation_config.pad_token_id = vocab["<pad>"]
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@dataclass(frozen=True)
class OpState:
    relation: str
    subject: str
    obj: str

    @property
    def right_op(self) -> str:
        return RELATION_OP[self.relation]


def op_states(n: int, seed: int = 0) -> list[OpState]:
    rng = random.Random(seed)
    return [OpState(rel, rng.choice(ENTITIES), rng.choice(ENTITIES)) for rel in list(RELATION_OP) * (n // 4)]


class OpChoiceEnv:
    """Prompt: the memory's relation to a new fact; reward 1 when the first word is the right op."""

    def __init__(self, backend: TransformersBackend) -> None:
        self.backend = backend

    @staticmethod
    def messages(state: OpState) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"memory {state.relation} fact {state.subject} likes {state.obj} op"}]

    def key(self, state: OpState) -> str:
        return f"{state.relation}/{state.subject}/{state.obj}"

    def reward(self, state: OpState, text: str) -> float:
        words = text.split()
        return float(bool(words) and words[0] == state.right_op)

    def sample(self, state: OpState, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        messages = self.messages(state)
        completion, prompt = self.backend.chat(messages, params=params), self.backend.render(messages)
        samples = tuple(
            Sampled.reply(prompt, c.token_ids or (), c.text, self.reward(state, c.text), parse_failed=c.text.split()[:1] not in ([op] for op in OPS))
            for c in completion.choices
        )
        return [SampledGroup(self.key(state), samples)]

    def evaluate(self, states: Sequence[OpState]) -> dict[str, float]:
        greedy = SamplingParams(temperature=0.0, max_tokens=1)
        texts = [c.text for c in (self.backend.chat(self.messages(s), params=greedy).choices[0] for s in states)]
        return {"reward": sum(self.reward(s, t) for s, t in zip(states, texts)) / len(states)}


class OpRecipe(Recipe):
    """The shared loop on the synthetic op task (its RecipeConfig makes the learner GRPO)."""

    def _setup_data(self, policy, rollouts):  # type: ignore[no-untyped-def]
        return RecipeData(OpChoiceEnv(rollouts.backend), op_states(8, seed=0), op_states(8, seed=1))


class ZeroAdvantageRecipe(OpRecipe):
    """Identical, except that every advantage is 0: only the (zero at start) KL term is left."""

    def make_learner(self, policy):  # type: ignore[no-untyped-def]
        return ZeroAdvantages(self.config, self.world)


class SGDOpRecipe(OpRecipe):
    """Plain SGD instead of AdamW: the weights move by -lr * grad, so two runs whose gradients
    differ by float summation order end within float tolerance. (Adam's first steps are
    nearly lr * sign(g), so a gradient element that cancels to ~0 can flip with summation
    order: one process alone moves weights by up to 8e-3 at lr 1e-2 when only its
    micro-batch size changes, measured.)"""

    def new_optimizer(self):  # type: ignore[no-untyped-def]
        import torch

        return torch.optim.SGD([{"params": self.policy.trainable_parameters()}, *self.learner.param_groups()], lr=self.config.lr)


def op_config(model_dir: Path, out: Path, **overrides: object) -> RecipeConfig:
    """The op task's config: 4 states x 16 replies a step, one token each, two PPO epochs."""
    base = dict(
        model_path=str(model_dir), output_dir=str(out), progress=False, seed=0,
        lora=LoRASettings(rank=8, alpha=16, target_modules=("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head")),
        lr=1e-2, ppo_epochs=2, group_size=16, prompts_per_step=4, max_tokens=1, micro_batch_size=64,
        kl_coef=0.001, steps=30, checkpoint_every=1000,
        num_threads=1,  # a tiny model: more threads only add contention on a busy 2-core machine
    )  # fmt: skip
    return RecipeConfig.model_validate({**base, **overrides})


# -- a tiny model that speaks the Memory-R2 reply formats ---------------------------------------
# Metaspace words ("▁alice") decode with their spaces, and the JSON pieces are single tokens,
# so a reply is a handful of tokens; a short supervised warm-up teaches the formats (with
# random content), so rollouts write memories and session rewards differ between samples.
# Metaspace puts "▁" before every piece, the first one of a reply included
FORMAT_PIECES = ['▁{"facts":', '▁["', '▁{"ops":', '▁[{"op":', '▁"', '▁"]}', '▁ADD",', '▁"text":', '▁"}]}', '▁NOOP"}]}']
FORMAT_WORDS = ["▁alice", "▁bob", "▁likes", "▁has", "▁tea", "▁dog", "▁cat", "▁paris"]


def _warm_up(model: Any, tokenizer: Any, vocab: dict[str, int], example: Any, steps: int, folder: Path) -> Path:
    """A short supervised warm-up on ``example() -> (prompt, reply)`` pairs, then save."""
    import torch

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        pairs = [example() for _ in range(16)]
        prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p, _ in pairs]
        replies = [tokenizer(r, add_special_tokens=False)["input_ids"] + [vocab["<eos>"]] for _, r in pairs]
        width = max(len(p) + len(r) for p, r in zip(prompts, replies))
        ids = torch.full((len(pairs), width), vocab["<pad>"])
        labels = torch.full((len(pairs), width), -100)
        for row, (p, r) in enumerate(zip(prompts, replies)):
            ids[row, : len(p) + len(r)] = torch.tensor(p + r)
            labels[row, len(p) : len(p) + len(r)] = torch.tensor(r)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.generation_config.pad_token_id = vocab["<pad>"]
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


SPECIALS_METASPACE = ["<pad>", "<unk>", "<eos>", "▁<|system|>", "▁<|user|>", "▁<|assistant|>"]


def make_format_model(folder: Path, *, seed: int = 0, warmup_steps: int = 80) -> Path:
    model, tokenizer, vocab = _word_llama([*SPECIALS_METASPACE, *FORMAT_PIECES, *FORMAT_WORDS], seed=seed, max_positions=4096, metaspace=True)
    rng = random.Random(seed)
    words = [w.lstrip("▁") for w in FORMAT_WORDS]

    def example() -> tuple[str, str]:
        content = " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.5:
            return '<|assistant|> {"facts": ["', content + ' "]}'
        reply = 'ADD", "text": " ' + content + ' "}]}' if rng.random() < 0.7 else 'NOOP"}]}'
        return '<|assistant|> {"ops": [{"op": "', reply

    return _warm_up(model, tokenizer, vocab, example, warmup_steps, folder)


# -- a tiny model that speaks Mem-alpha's writer reply --------------------------------------------
# One call per reply, its tier drawn 50/50 during the warm-up between "semantic" (the bank
# applies it) and "episodic" (the bank refuses it: only the ingest loop writes turns), so the
# format reward R2 has a right answer for GRPO to find.
WRITER_PIECES = ['▁{"calls":', '▁[{"fn":', '▁"memory_', '▁insert",', '▁"tier":', '▁"semantic",', '▁"episodic",', '▁"text":', '▁"', '▁"}]}']


def make_writer_model(folder: Path, *, seed: int = 0, warmup_steps: int = 80, prompts: Sequence[Sequence[dict[str, str]]] = ()) -> Path:
    """``prompts``: chat requests (ending in the writer's response prefix) to warm up on, so
    the format is learned after the long writer prompt the recipe really sends, not only
    after a bare prefix (with the bare prefix alone, two seeds of three never wrote a
    parseable reply once the real prompt came in front of it)."""
    model, tokenizer, vocab = _word_llama([*SPECIALS_METASPACE, *WRITER_PIECES, *FORMAT_WORDS], seed=seed, max_positions=4096, metaspace=True)
    rng = random.Random(seed)
    words = [w.lstrip("▁") for w in FORMAT_WORDS]
    rendered = [render(tokenizer, list(p)) for p in prompts] or ['<|assistant|> {"calls": [{"fn": "memory_']

    def example() -> tuple[str, str]:
        content = " ".join(rng.choice(words) for _ in range(rng.randint(2, 3)))
        tier = rng.choice(["semantic", "episodic"])
        return rng.choice(rendered), f'insert", "tier": "{tier}", "text": " {content} "}}]}}'

    return _warm_up(model, tokenizer, vocab, example, warmup_steps, folder)
