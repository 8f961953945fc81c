"""The Ray cluster of the Ray env-pool tests: two nodes on loopback, started once per session and always stopped."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Ray notices a lost node after health_check_failure_threshold missed checks: ~1 s here, not Ray's default ~15 s
FAST_HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 300,
    "health_check_failure_threshold": 3,
}


@dataclass
class RayCluster:
    """A running ``ray.cluster_utils.Cluster`` the driver (this process) is connected to."""

    cluster: Any
    head_id: str
    worker_id: str

    def add_node(self, **args: Any) -> Any:
        """Add one more node (2 logical CPUs) and wait until it is up."""
        return self.cluster.add_node(num_cpus=2, **args)


@pytest.fixture(scope="session")
def ray_cluster():
    """A head and a second node on 127.0.0.1 (2 logical CPUs each, no dashboard), torn down after the session.

    Their workers import this checkout: PYTHONPATH names it while the nodes start (they inherit it).
    """
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), *([saved] if saved else [])])
    cluster = None
    try:
        head_args = {"num_cpus": 2, "include_dashboard": False}
        cluster = Cluster(initialize_head=True, head_node_args={**head_args, "_system_config": FAST_HEALTH_CHECKS})
        worker = cluster.add_node(num_cpus=2)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        yield RayCluster(cluster, cluster.head_node.node_id, worker.node_id)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
