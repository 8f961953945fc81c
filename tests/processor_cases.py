"""Shared lists of templates and presets under test."""

from trl_env.testing.template_tokenizers import FAMILIES

# templates the automatic path chunks, and those it must refuse (with the preset to use instead)
CHUNKABLE = [
    "qwen2_5",
    "qwen3",
    "qwen3_instruct_2507",
    "llama3",
    "llama3_1",
    "llama3_2",
    "gemma",
    "gemma3",
    "gemma4",
    "smolvlm",
    "idefics3",
    "lfm2",
    "phi3_5",
    "cohere",
    "cohere2",
]
UNCHUNKABLE = ["qwen3_5_think", "qwen3_5_nothink", "deepseek_r1_distill", "deepseekv3"]
# chunkable templates whose chunks fail the additivity check (plain-text generation prompt "Assistant:")
NON_ADDITIVE = {"smolvlm", "idefics3"}

# preset -> (template it imitates, template kwargs)
PRESET_TEMPLATES = {
    "qwen3_thinking": ("qwen3", {"enable_thinking": True}),
    "qwen3_nothink": ("qwen3", {"enable_thinking": False}),
    "qwen3_5_thinking": ("qwen3_5_think", {}),
    "qwen3_5_nothink": ("qwen3_5_nothink", {}),
    "gemma4": ("gemma4", {}),
    "gemma4_thinking": ("gemma4", {"enable_thinking": True}),
    "deepseek_r1": ("deepseek_r1_distill", {}),
}

assert set(CHUNKABLE) | set(UNCHUNKABLE) == set(FAMILIES)
