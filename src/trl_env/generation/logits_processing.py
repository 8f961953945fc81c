"""Which ``generation_config`` fields ask ``model.generate`` for more than temperature, top-k and top-p.

:class:`~trl_env.generation.transformers_generator.TransformersGenerator` samples with its own loop unless a
model's ``generation_config`` sets one of them (then ``model.generate`` samples, so that processing applies).
"""

from __future__ import annotations

# generation_config fields that make model.generate process logits beyond temperature/top-k/top-p,
# with their neutral values
_EXTRA_PROCESSING: dict[str, tuple[object, ...]] = {
    "repetition_penalty": (None, 1.0),
    "encoder_repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "min_p": (None,),
    "top_h": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "sequence_bias": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "renormalize_logits": (None, False),
    "exponential_decay_length_penalty": (None,),
    "guidance_scale": (None, 1.0),
    "watermarking_config": (None,),
}


def extra_logits_processing(generation_config: object) -> list[str]:
    """The ``generation_config`` fields that ask ``model.generate`` for more than temperature/top-k/top-p.

    Example:
        >>> from transformers import GenerationConfig
        >>> extra_logits_processing(GenerationConfig(repetition_penalty=1.1))
        ['repetition_penalty']
    """
    return [
        name for name, neutral in _EXTRA_PROCESSING.items() if getattr(generation_config, name, None) not in neutral
    ]
