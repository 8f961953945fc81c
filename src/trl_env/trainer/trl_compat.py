"""Every use of TRL internals in one place, behind a version check.

trl-env targets TRL 1.16's ``rollout_func`` API. The members read here are not public API
and may move in another release; :func:`require_supported_trl` fails early and clearly.

Example:
    >>> require_supported_trl()  # raises on an unsupported TRL
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import trl
from packaging.version import Version

from trl_env.errors import BackendError

SUPPORTED_TRL = (Version("1.15.0"), Version("1.17.0"))


def require_supported_trl(version: str | None = None) -> None:
    """Raise ``RuntimeError`` unless TRL is in the supported range (1.15.x or 1.16.x).

    Example:
        >>> require_supported_trl("1.16.0")  # doctest: +ELLIPSIS
        >>> require_supported_trl("0.19.0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        trl_env.errors.BackendError: trl-env needs trl>=1.15.0,<1.17.0 for rollout_func support; found trl 0.19.0 ...
    """
    found = Version(version or trl.__version__)
    low, high = SUPPORTED_TRL
    if not (low <= found < high):
        raise BackendError(
            f"trl-env needs trl>={low},<{high} for rollout_func support; found trl {found} "
            "(pip install 'trl>=1.15,<1.17')"
        )


def trainer_tokenizer(trainer: Any) -> Any:
    """The text tokenizer of a GRPOTrainer (the inner tokenizer of a VLM processor)."""
    processing_class = trainer.processing_class
    return getattr(processing_class, "tokenizer", processing_class)


def model_for_generation(trainer: Any) -> Callable[[], AbstractContextManager[Any]]:
    """A context-manager factory yielding the trainer's model unwrapped for ``generate``."""
    from trl.models import unwrap_model_for_generation

    def context() -> AbstractContextManager[Any]:
        return unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        )

    return context


def reference_logps(trainer: Any, ids: Any, mask: Any, completion_width: int) -> Any:
    """Per-token logprobs of the reference policy on ``ids``, the way TRL 1.16 computes them for ``beta > 0``.

    The trainer's ``ref_model`` when it has one; otherwise (a PEFT adapter) the model with the adapter disabled,
    or its initial copy named ``"ref"`` when an existing adapter is re-trained.
    """
    import torch
    from trl.trainer.utils import use_adapter

    size = trainer.args.per_device_train_batch_size
    with torch.no_grad():
        if trainer.ref_model is not None:
            return trainer._get_per_token_logps_and_entropies(trainer.ref_model, ids, mask, completion_width, size)[0]
        model = trainer.accelerator.unwrap_model(trainer.model)
        with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
            return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, completion_width, size)[0]


def log_metric(trainer: Any, name: str, value: float) -> None:
    """Append ``value`` to the metric ``name`` that TRL averages and logs at each logging step."""
    mode = "train" if trainer.model.training else "eval"
    trainer._metrics[mode][name].append(float(value))


def sum_over_processes(trainer: Any, values: list[float]) -> list[float]:
    """Element-wise sum of ``values`` over the trainer's processes (collective; identity on one process)."""
    accelerator = trainer.accelerator
    if accelerator.num_processes <= 1:
        return list(values)
    import torch

    tensor = torch.tensor(values, dtype=torch.float64, device=accelerator.device)
    return [float(v) for v in accelerator.reduce(tensor, reduction="sum").tolist()]


def gather_objects(trainer: Any, values: list[Any]) -> list[Any]:
    """Every process's ``values`` joined in rank order (collective; identity on one process)."""
    if trainer.accelerator.num_processes <= 1:
        return list(values)
    from accelerate.utils import gather_object

    return list(gather_object(values))


def uses_vllm(trainer: Any) -> bool:
    """Whether the trainer samples with vLLM (``GRPOConfig(use_vllm=True)``)."""
    return bool(trainer.use_vllm)


def vllm_generation(trainer: Any) -> Any:
    """The trainer's vLLM generation handle (``use_vllm=True`` only)."""
    handle = getattr(trainer, "vllm_generation", None)
    if handle is None:
        raise BackendError("trainer.use_vllm is True but the trainer has no vllm_generation handle (TRL 1.16 API)")
    return handle


def vllm_is_collective(handle: Any) -> bool:
    """Whether ``handle.generate`` is a collective call across processes.

    True in server mode (prompts are gathered to the main process and results broadcast) and
    in colocate mode with ``vllm_tensor_parallel_size > 1`` (prompts are gathered within each
    tensor-parallel group); in both, TRL slices the results as if every process had sent the
    same number of prompts.

    Example:
        >>> from types import SimpleNamespace
        >>> vllm_is_collective(SimpleNamespace(mode="server", tensor_parallel_size=1))
        True
        >>> vllm_is_collective(SimpleNamespace(mode="colocate", tensor_parallel_size=1))
        False
    """
    return handle.mode == "server" or int(getattr(handle, "tensor_parallel_size", 1)) > 1


def vllm_generate_tokens(
    handle: Any, prompts: list[list[int]], *, max_tokens: int, stop_token_ids: list[int]
) -> tuple[list[list[int]], list[list[float]]]:
    """One call of TRL's ``VLLMGeneration.generate`` with per-call sampling settings.

    TRL reads ``max_tokens`` from the handle's ``max_completion_length`` and takes no stop
    tokens, but merges ``handle.generation_kwargs`` last into the sampling parameters in both
    modes (the ``SamplingParams`` in colocate mode, the ``/v1/completions`` body in server
    mode). So ``max_tokens``, ``stop_token_ids`` and ``logprobs=0`` (the sampled token's
    logprob only, so entry 0 of each position is the sampled token's) are set there for the
    duration of the call and restored afterwards. Returns the completion ids and the
    sampled-token logprobs; checks that TRL handed back this process's own prompts.

    Example:
        >>> ids, logprobs = vllm_generate_tokens(trainer.vllm_generation, [[1, 2]], max_tokens=8,
        ...                                      stop_token_ids=[151645])  # doctest: +SKIP
    """
    saved = handle.generation_kwargs
    handle.generation_kwargs = {
        **(saved or {}),
        "max_tokens": max_tokens,
        "stop_token_ids": list(stop_token_ids),
        "logprobs": 0,
    }
    try:
        prompt_ids, completion_ids, logprobs, _ = handle.generate(prompts=prompts, images=None, num_generations=1)
    finally:
        handle.generation_kwargs = saved
    if prompt_ids is not None and [list(p) for p in prompt_ids] != [list(p) for p in prompts]:
        raise BackendError("TRL's vLLM generate returned completions for other prompts than this process sent")
    if logprobs is None:
        raise BackendError("TRL's vLLM generate returned no logprobs")
    return [list(ids) for ids in completion_ids], [[float(lp[0]) for lp in seq] for seq in logprobs]


def enable_vllm_cpu_weight_sync() -> bool:
    """Make TRL's colocate weight sync work on vLLM's CPU backend; return whether it applies.

    vLLM-CPU repacks each linear layer's weight into a oneDNN/SGL kernel handle after loading
    and drops the parameter, so TRL 1.16's ``sync_weights`` (``model.load_weights`` per
    parameter) fails there. vLLM's own reload path (``initialize_layerwise_reload`` ...
    ``finalize_layerwise_reload``, as in its ``reload_weights``) restores the layers, loads
    the new weights and repacks them. This wraps ``VLLMGeneration.sync_weights`` in that
    pair, in colocate mode and on the CPU platform only; elsewhere nothing changes. It is
    idempotent and must run before ``trainer.train()`` (the first sync precedes the first
    ``rollout_func`` call).

    Example:
        >>> enable_vllm_cpu_weight_sync()  # doctest: +SKIP
        True
    """
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    if not current_platform.is_cpu():
        return False
    import functools

    from trl.generation.vllm_generation import VLLMGeneration

    original = VLLMGeneration.sync_weights
    if getattr(original, "_trl_env_cpu_reload", False):
        return True

    @functools.wraps(original)
    def sync_weights(self: Any) -> None:
        if self.mode != "colocate":
            return original(self)
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

        runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
        initialize_layerwise_reload(runner.model)
        try:
            return original(self)
        finally:
            finalize_layerwise_reload(runner.model, runner.model_config)

    sync_weights._trl_env_cpu_reload = True  # type: ignore[attr-defined]
    VLLMGeneration.sync_weights = sync_weights
    return True


TRL_GRPO_LOGGER = "trl.trainer.grpo_trainer"
UNSCORABLE_PREFIX = "All reward functions returned None for the following kwargs:"
UNSCORABLE_SHORT = (
    "All reward functions returned None for a sample: its env failed (trl-env's env_reward is None), so TRL "
    "leaves it out of the loss; the step's env/errors counts them and the transcripts show why"
)


class _ShortUnscorableWarning:
    """Shortens TRL's "All reward functions returned None" warning for trl-env episodes to one line.

    TRL prints every reward keyword of the row, and a trl-env row carries the whole episode transcript
    (kilobytes per warning). Rows without trl-env's ``env_reward`` column keep TRL's message.

    Example:
        >>> import logging
        >>> text = "[RANK 0] " + UNSCORABLE_PREFIX + "\\n{'env_reward': None, 'transcript': '...'}"
        >>> record = logging.makeLogRecord({"msg": text})
        >>> _ShortUnscorableWarning().filter(record), record.getMessage() == "[RANK 0] " + UNSCORABLE_SHORT
        (True, True)
    """

    def filter(self, record: Any) -> bool:
        message = str(record.msg)
        start = message.find(UNSCORABLE_PREFIX)  # after accelerate's "[RANK n] "
        if start >= 0 and "'env_reward': None" in message:
            record.msg, record.args = message[:start] + UNSCORABLE_SHORT, ()
        return True


def shorten_unscorable_warning() -> None:
    """Install :class:`_ShortUnscorableWarning` on TRL's GRPO trainer logger (once)."""
    import logging

    logger = logging.getLogger(TRL_GRPO_LOGGER)
    if not any(isinstance(f, _ShortUnscorableWarning) for f in logger.filters):
        logger.addFilter(_ShortUnscorableWarning())


_COMPACT = threading.local()  # set while compact_fused_lm_head() is open in this thread


@contextmanager
def compact_fused_lm_head() -> Iterator[None]:
    """While open (in this thread), TRL's fused LM head scores only the labelled positions, on every device.

    TRL 1.16's ``add_fused_lm_head`` compacts the hidden states to the positions whose label is not ``-100``
    only on Triton devices (``trl.trainer.utils._use_triton``): elsewhere it projects every position of prompt and
    completion onto the vocabulary and zeroes the unlabelled ones afterwards (to keep tile shapes fixed for
    compiled backends such as Neuron). On CPU that is most of the LM head's work. The compacted path gives the same
    values (the same rows of the same product); TRL 1.15 always took it. Other threads are unaffected.

    Example:
        >>> with compact_fused_lm_head():
        ...     pass
    """
    import trl.trainer.utils as trl_utils

    original = getattr(trl_utils, "_use_triton", None)
    if original is None:  # TRL 1.15: always compact
        yield
        return
    if not getattr(original, "_trl_env_compact", False):

        def use_triton_or_compact(device: Any) -> bool:
            return getattr(_COMPACT, "on", False) or original(device)

        use_triton_or_compact._trl_env_compact = True  # type: ignore[attr-defined]
        trl_utils._use_triton = use_triton_or_compact
    before = getattr(_COMPACT, "on", False)
    _COMPACT.on = True
    try:
        yield
    finally:
        _COMPACT.on = before
