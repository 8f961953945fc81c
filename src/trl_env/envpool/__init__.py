"""The isolated env pool: envs in worker processes or threads, with deadlines, crash containment and forks.

The rollout engine uses :class:`EnvPool` (which checks the env factory, chooses where its envs run and pickles it
once, at construction); what comes back from a call is an
:class:`EnvReply` or an :class:`EnvFault`, and an env that breaks the protocol raises :class:`EnvContractError`.
Inside: ``pool.py`` (the public pool) and ``slot.py`` (its handle on one episode's env), ``state.py`` and
``worker.py`` (slots and workers, parent side), ``backends.py`` (processes or threads), ``host.py`` and
``host_loops.py`` (the env inside a worker, child side), ``replies.py`` (what a call returns), ``values.py`` (env
values checked in the worker), ``forking.py`` (copying an env), ``isolation.py`` (where a factory's envs run).
"""

from trl_env.envpool.isolation import factory_name
from trl_env.envpool.pool import EnvPool, EnvSlot
from trl_env.envpool.replies import EnvContractError, EnvFault, EnvReply

__all__ = ["EnvContractError", "EnvFault", "EnvPool", "EnvReply", "EnvSlot", "factory_name"]
