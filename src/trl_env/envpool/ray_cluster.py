"""Connecting to a Ray cluster for the env pool, and checking an env's resource request against it.

Nothing here imports Ray at module level: ``import trl_env`` stays light, and Ray is imported (with a clear
message when it is missing) only when a pool with ``isolation="ray"`` is built.

- :func:`check_ray_resources` checks ``RolloutConfig.ray_resources`` when the config is built (no Ray needed).
- :func:`connect` joins the cluster at ``ray_address`` (else ``$RAY_ADDRESS``; else it starts a local instance for
  the run). An address nothing listens on is a :class:`~trl_env.errors.BackendError` within seconds: ``ray.init``
  itself would retry for minutes.
- :func:`check_feasible` refuses, before any episode, a request that no live node of the cluster can ever hold
  (Ray would keep such an actor pending forever: the run would hang).

Example:
    >>> check_ray_resources({"num_cpus": 0.5, "resources": {"sandbox": 1}})
    {'num_cpus': 0.5, 'resources': {'sandbox': 1}}
    >>> check_ray_resources({"cpus": 1})
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigError: ray_resources has unknown key 'cpus'; the keys are: num_cpus, num_gpus, ...
    >>> needs({"num_cpus": 2, "memory": 2**30, "resources": {"sandbox": 1}})
    {'CPU': 2, 'memory': 1073741824, 'sandbox': 1}
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any

from trl_env.errors import BackendError, ConfigError, ConfigTypeError

KEYS = ("num_cpus", "num_gpus", "memory", "resources", "scheduling_strategy")
STRATEGIES = ("SPREAD", "DEFAULT")
DEFAULT_STRATEGY = "SPREAD"  # envs spread over the nodes: the load of a batch lands on all of them
CONNECT_TIMEOUT_S = 5.0


def _amount(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"ray_resources {name} must be a number >= 0, got {value!r}")


def check_ray_resources(resources: Any) -> dict[str, Any]:
    """Check a per-env resource request and return it.

    Args:
        resources: a dict with any of ``num_cpus``, ``num_gpus``, ``memory`` (bytes), ``resources`` (custom
            resources, e.g. ``{"sandbox": 1}``) and ``scheduling_strategy`` (``"SPREAD"``, the default, or
            ``"DEFAULT"``: Ray packs actors where it likes).

    Returns:
        ``resources`` itself.

    Raises:
        ConfigTypeError: not a dict (or ``resources`` inside is not one).
        ConfigError: an unknown key, a negative or non-numeric amount, an unknown strategy.
    """
    if not isinstance(resources, dict):
        raise ConfigTypeError(f"ray_resources must be a dict such as {{'num_cpus': 1}}, got {resources!r}")
    for key, value in resources.items():
        if key not in KEYS:
            raise ConfigError(f"ray_resources has unknown key {key!r}; the keys are: {', '.join(KEYS)}")
        if key == "resources":
            if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
                raise ConfigTypeError(f"ray_resources['resources'] must map names to amounts, got {value!r}")
            for name, amount in value.items():
                _amount(name, amount)
        elif key == "scheduling_strategy":
            if value not in STRATEGIES:
                raise ConfigError(f"ray_resources scheduling_strategy must be one of {STRATEGIES}, got {value!r}")
        else:
            _amount(key, value)
    return resources


def needs(resources: dict[str, Any]) -> dict[str, float]:
    """What one env actor needs of a node, in Ray's resource names (an actor asks for 1 CPU unless told)."""
    need: dict[str, float] = {"CPU": resources.get("num_cpus", 1)}
    for key, name in (("num_gpus", "GPU"), ("memory", "memory")):
        if key in resources:
            need[name] = resources[key]
    need.update(resources.get("resources", {}))
    return {name: amount for name, amount in need.items() if amount}


def actor_options(resources: dict[str, Any]) -> dict[str, Any]:
    """The ``.options(...)`` of each env actor: the request, the strategy, and no restarts or retries.

    Example:
        >>> actor_options({"num_cpus": 0})["scheduling_strategy"], actor_options({})["max_restarts"]
        ('SPREAD', 0)
    """
    options = {key: value for key, value in resources.items() if key != "scheduling_strategy"}
    # a restarted actor would have lost its env (and a retried step would run twice): a lost env fails its episode
    options.update(max_restarts=0, max_task_retries=0)
    options["scheduling_strategy"] = resources.get("scheduling_strategy", DEFAULT_STRATEGY)
    return options


def import_ray() -> Any:
    """``import ray``, or a :class:`~trl_env.errors.ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ConfigError(
            'env_isolation="ray" needs Ray: pip install "trl-env[ray]" (it installs ray==2.60.0)'
        ) from error
    return ray


def _check_reachable(address: str) -> None:
    """Fail fast when nothing listens at ``host:port`` (``ray.init`` would retry for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local" or a form Ray parses itself
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise BackendError(
            f"cannot reach the Ray cluster at {address} ({error}); start it (ray start --head) or fix "
            "ray_address / $RAY_ADDRESS"
        ) from None


def connect(address: str | None) -> Any:
    """Join the cluster for env actors (once per process) and return the ``ray`` module.

    Args:
        address: the cluster (``"host:port"``, ``"ray://host:port"``, ``"auto"``); None: ``$RAY_ADDRESS``, else a
            local instance started for this process (its workers inherit this process's environment, so the
            factory's module must be installed or on ``$PYTHONPATH``), stopped at exit.

    Raises:
        ConfigError: Ray is not installed.
        BackendError: the cluster cannot be reached; the message names the address.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address is None:
            # "local": always a new instance (with no address ray.init would join any cluster started on this machine)
            ray.init(address="local", include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        else:
            _check_reachable(address)
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except BackendError:
        raise
    except Exception as error:  # Ray's own errors (ConnectionError, RuntimeError...): one message, ours
        raise BackendError(
            f"cannot connect to the Ray cluster at {address or 'a new local instance'}: {error}"
        ) from error
    return ray


def check_feasible(ray: Any, resources: dict[str, Any]) -> None:
    """Refuse a request that no live node can ever hold, before any actor waits forever for one.

    Raises:
        BackendError: the message lists what one env needs and what each node has.
    """
    need = needs(resources)
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    for node in nodes:
        have = node.get("Resources", {})
        if all(have.get(name, 0) >= amount for name, amount in need.items()):
            return
    offered = "; ".join(
        f"{node.get('NodeManagerAddress')}: "
        + ", ".join(f"{k}={v:g}" for k, v in sorted(node.get("Resources", {}).items()) if "node:" not in k)
        for node in nodes
    )
    raise BackendError(
        f"no node of the Ray cluster can ever hold one env: it needs {need} (ray_resources) and the nodes have "
        f"{offered or 'nothing (no live node)'}; lower ray_resources or add a node that has them"
    )
