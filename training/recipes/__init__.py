"""Training recipes: GRPO for Memory-R1's manager and answerer, LoGo-GRPO for Memory-R2.

config        typed configs (pydantic), `load_config` for YAML / JSON files
policy        `Policy` (base + LoRA: scoring; sampling through the runtime's `TransformersBackend`)
rollouts      in-process or vLLM rollouts (runtime LoRA reload after each update)
update        `ppo_update`: PPO-clip + KL to the adapter-free model + entropy, over scored rows
metrics       the JSONL metrics log and the PNG of its curves
grpo          `GRPORecipe`: the shared single-call GRPO loop (setup / train / save_checkpoint / cleanup)
grpo_manager  `ManagerGRPORecipe`: Memory-R1's manager with a frozen answerer as the reward
warm_start    supervised warm start of the manager on the heuristic manager's valid replies, before RL
ppo_manager   `ManagerPPORecipe`: the same manager with PPO and a value head (the paper's PPO variant)
grpo_answerer `AnswererGRPORecipe`: Memory-R1's answer agent on (question, k memories, gold)
logo_grpo     `LogoGRPORecipe`: Memory-R2's shared extractor + manager, LoGo groups, curriculum
grpo_writer   `WriterGRPORecipe`: Mem-alpha's writer, GRPO without KL, R1 + R2_t + w3 R3 + w4 R4_t
"""

from .config import AnswererGRPOConfig, LoRASettings, LogoGRPOConfig, ManagerGRPOConfig, ManagerPPOConfig, PublishSettings, RecipeConfig, WriterGRPOConfig, load_config
from .grpo import GroupEnv, GRPORecipe, Learned, RecipeData, Sampled, SampledGroup, step_seed
from .metrics import MetricsLog, plot_metrics, read_metrics
from .policy import Policy, Scored
from .rollouts import InProcessRollouts, RolloutEngine, VLLMRollouts, rollout_engine
from .update import Row, UpdateStats, ppo_update, update_metrics

__all__ = [
    "AnswererGRPOConfig",
    "GRPORecipe",
    "GroupEnv",
    "InProcessRollouts",
    "Learned",
    "LoRASettings",
    "LogoGRPOConfig",
    "ManagerGRPOConfig",
    "ManagerPPOConfig",
    "MetricsLog",
    "Policy",
    "PublishSettings",
    "RecipeConfig",
    "RecipeData",
    "RolloutEngine",
    "Row",
    "Sampled",
    "SampledGroup",
    "Scored",
    "UpdateStats",
    "VLLMRollouts",
    "WriterGRPOConfig",
    "load_config",
    "plot_metrics",
    "ppo_update",
    "read_metrics",
    "rollout_engine",
    "step_seed",
    "update_metrics",
]
