"""Spotting a multi-process launch that left this process training alone.

Two launches look distributed but are not: ``accelerate launch --cpu --num_processes 2`` runs the
script once (accelerate's multi-CPU launcher is ``mpirun``, used only with ``--mpirun_hostfile``),
and ``torchrun`` on a machine without GPUs starts several processes that each train alone unless the
trainer runs on the CPU (``GRPOConfig(use_cpu=True)`` or ``ACCELERATE_USE_CPU=1``), which gives
accelerate its gloo backend. Both train "fine", on the wrong data and with per-process metrics, so
``make_rollout_func`` warns.

Example:
    >>> launch_problem({"WORLD_SIZE": "2"}, num_processes=2) is None
    True
    >>> print(launch_problem({"ACCELERATE_USE_CPU": "True", "MASTER_PORT": "29500"}, num_processes=1))
    accelerate launch --cpu --num_processes N started one process: ...
"""

from __future__ import annotations

from collections.abc import Mapping

_MPI_SIZES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launch_problem(environ: Mapping[str, str], num_processes: int) -> str | None:
    """Why this process trains alone although its launcher was asked for several; None when all is well.

    Args:
        environ: the process's environment (``os.environ``).
        num_processes: the trainer's ``accelerator.num_processes``.
    """
    if num_processes > 1:
        return None
    world = int(environ.get("WORLD_SIZE") or 1)
    if world > 1:
        return (
            f"WORLD_SIZE={world} but accelerate runs this process alone, so each process trains on its own: "
            "without GPUs, train on the CPU (GRPOConfig(use_cpu=True) or ACCELERATE_USE_CPU=1) to get gloo"
        )
    cpu = environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
    # accelerate's one-process launcher sets MASTER_PORT only when it was asked for more than one process
    if cpu and "MASTER_PORT" in environ and not any(name in environ for name in _MPI_SIZES):
        return (
            "accelerate launch --cpu --num_processes N started one process: its multi-CPU launcher is mpirun "
            "(--mpirun_hostfile). Use torchrun --nproc_per_node N, or accelerate launch --config_file "
            "configs/accelerate_cpu_2proc.yaml (no --cpu)"
        )
    return None
