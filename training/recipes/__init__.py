"""Training recipes: one on-policy loop, composed per recipe of a sampler, a learner and stages.

loop          `Recipe`: the loop (setup / train / save_checkpoint / cleanup), `Stage`, `RecipeData`
samples       what a sampler returns (`SampledGroup` of `Sampled` members, their `Completion`s), `Sampler`
learners      `GroupLearner` (GRPO / Dr.GRPO, DAPO filter), `ValueLearner` (PPO with a value head)
update        `ppo_update`: PPO-clip + KL to the adapter-free model + entropy, over scored rows
config        `RecipeConfig`, the configs' shared base (each recipe's own sits in its module), `load_config` for YAML / JSON files
lora_model    `LoRAModel` (base + LoRA: scoring; sampling through the runtime's `TransformersBackend`)
rollouts      in-process or vLLM rollouts (runtime LoRA reload after each update)
metrics       the JSONL metrics log and the PNG of its curves
manager       `ManagerRecipe`: Memory-R1's manager, a frozen answerer as the reward (GRPO, or PPO by its config's learner)
warm_start    supervised warm start of the manager on the heuristic manager's valid replies, before RL
answerer      `AnswererRecipe`: Memory-R1's answer agent on (question, k memories, gold)
logo_grpo     `LogoGRPORecipe`: Memory-R2's shared extractor + manager, LoGo groups, curriculum stages
writer        `WriterRecipe`: Mem-alpha's writer, GRPO without KL, R1 + R2_t + w3 R3 + w4 R4_t
deltamem      `DeltaMemRecipe`: DeltaMem's looking manager, GRPO on format + retrieval + soft state F1 vs target states
memagent      `MemAgentRecipe`: MemAgent's reader, Multi-Conv DAPO (one advantage per rollout of all its conversations)
dynamic_sampling  `DynamicSampling`: any sampler, with groups whose rewards are all equal drawn again (DAPO)
"""

from .answerer import AnswererGRPOConfig
from .config import LoRASettings, PublishSettings, RecipeConfig, load_config
from .deltamem import DeltaMemGRPOConfig
from .dynamic_sampling import DynamicSampling
from .learners import GroupLearner, Learned, Learner, ValueLearner
from .logo_grpo import LogoGRPOConfig
from .loop import Recipe, RecipeData, Stage, step_seed
from .manager import ManagerGRPOConfig, ManagerPPOConfig
from .memagent import MemAgentDAPOConfig
from .metrics import MetricsLog, plot_metrics, read_metrics
from .lora_model import LoRAModel, Scored
from .rollouts import InProcessRollouts, RolloutEngine, VLLMRollouts, rollout_engine
from .samples import Completion, Sampled, SampledGroup, Sampler
from .update import Row, UpdateStats, ppo_update, update_metrics
from .writer import WriterGRPOConfig

__all__ = [
    "AnswererGRPOConfig",
    "Completion",
    "DeltaMemGRPOConfig",
    "DynamicSampling",
    "GroupLearner",
    "InProcessRollouts",
    "Learned",
    "Learner",
    "LoRASettings",
    "LogoGRPOConfig",
    "ManagerGRPOConfig",
    "ManagerPPOConfig",
    "MemAgentDAPOConfig",
    "MetricsLog",
    "LoRAModel",
    "PublishSettings",
    "Recipe",
    "RecipeConfig",
    "RecipeData",
    "RolloutEngine",
    "Row",
    "Sampled",
    "SampledGroup",
    "Sampler",
    "Scored",
    "Stage",
    "UpdateStats",
    "ValueLearner",
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
