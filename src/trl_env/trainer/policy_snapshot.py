"""A copy of the policy that background rollouts sample with while the trainer updates the original.

Pipelined training (:mod:`trl_env.trainer.pipeline`) plays the next steps' episodes while the optimizer changes
the trainer's model, so the sampler needs weights of its own that change only between batches. A
:class:`PolicySnapshot` is a deep copy of the unwrapped model, frozen (no gradients, eval mode). After every
optimizer step the trainer :meth:`~PolicySnapshot.publish`\\ es its *trainable* parameters (all of them under full
fine-tuning, the adapter only under LoRA: the frozen base is never copied again) into a staging copy; the
rollout thread :meth:`~PolicySnapshot.refresh`\\ es the snapshot from it before it starts a batch. Neither side
ever reads a tensor the other is writing: publish runs on the trainer's thread between optimizer steps, refresh on
the rollout thread between batches, and the staging copy is swapped under a lock.

Example:
    >>> import torch
    >>> model = torch.nn.Linear(2, 2)
    >>> snapshot = PolicySnapshot(model)
    >>> with torch.no_grad():
    ...     _ = model.weight.add_(1.0)
    >>> snapshot.version, bool(torch.equal(snapshot.model.weight, model.weight))
    (0, False)
    >>> snapshot.publish(model, version=1)
    >>> snapshot.refresh(), snapshot.version, bool(torch.equal(snapshot.model.weight, model.weight))
    (True, 1, True)
"""

from __future__ import annotations

import copy
import threading

import torch

from trl_env.errors import ConfigError


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Detached copies of the parameters that training changes (``requires_grad``).

    Args:
        model: the trainer's (unwrapped) model.

    Returns:
        Parameter name to a CPU-or-device clone, in the model's own dtype.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> layer.bias.requires_grad_(False)  # doctest: +ELLIPSIS
        Parameter...
        >>> sorted(trainable_state(layer))
        ['weight']
    """
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


class PolicySnapshot:
    """A frozen copy of a policy, refreshed from published weights between batches.

    Args:
        model: the trainer's unwrapped model (``accelerator.unwrap_model(trainer.model)``), copied once here.
        version: the policy version of the copy (the trainer's ``global_step`` at the time).
    """

    def __init__(self, model: torch.nn.Module, version: int = 0) -> None:
        self.model = copy.deepcopy(model)
        self.model.eval()
        for module in self.model.modules():
            # accelerate (mixed precision) and TRL (an fp32 lm_head) replace `forward` on the instance with closures
            # over the *original* module, which deepcopy does not copy: the copy would run the trainer's weights
            for name in ("forward", "_original_forward"):
                module.__dict__.pop(name, None)
        if getattr(self.model, "is_gradient_checkpointing", False):  # it only costs the sampler its key/value cache
            self.model.gradient_checkpointing_disable()
        config = getattr(self.model, "config", None)
        if config is not None and hasattr(config, "use_cache"):  # TRL turns it off for checkpointed training
            config.use_cache = True
        # the copy keeps the names and the requires_grad flags that publish() relies on, but no gradients
        self._trainable = {name for name, p in self.model.named_parameters() if p.requires_grad}
        self._params = dict(self.model.named_parameters())
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.version = version
        self._staged: tuple[int, dict[str, torch.Tensor]] | None = None
        self._lock = threading.Lock()

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Stage the trainer's current trainable weights as ``version`` (trainer thread, between steps).

        Args:
            model: the trainer's unwrapped model.
            version: its version (``global_step``).
        """
        state = trainable_state(model)
        unknown = sorted(set(state) - self._trainable)
        if unknown:  # e.g. a layer unfrozen after the copy was made: the snapshot would silently not follow it
            raise ConfigError(
                f"parameters {unknown[:3]} are trainable now but were frozen when the rollout snapshot was made; "
                "unfreeze them before training starts"
            )
        with self._lock:
            self._staged = (version, state)

    @property
    def published_version(self) -> int:
        """The newest version published (or the snapshot's own, when nothing newer is staged)."""
        with self._lock:
            return self._staged[0] if self._staged is not None else self.version

    def refresh(self) -> bool:
        """Load the newest published weights into the snapshot (rollout thread, between batches).

        Returns:
            Whether the weights changed.
        """
        with self._lock:
            staged, self._staged = self._staged, None
        if staged is None or staged[0] <= self.version:
            return False
        version, state = staged
        with torch.no_grad():
            for name, tensor in state.items():
                self._params[name].copy_(tensor)  # bumps the tensor version: generators drop cached keys/values
        self.version = version
        return True
