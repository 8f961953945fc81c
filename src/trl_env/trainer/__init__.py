"""TRL integration: the ``rollout_func``, its metrics, the trainer's vLLM, and every use of TRL internals."""
