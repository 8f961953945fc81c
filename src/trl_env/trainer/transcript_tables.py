"""Recorded training episodes as a table in the trainer's loggers that show tables (``report_to``).

With ``make_rollout_func(..., transcripts_every=N)`` and ``GRPOConfig(report_to=["wandb"])``, the
episodes recorded for the transcript files also go, at the next logging step, to a table
``env/transcripts`` with one row per episode: step, process, seed, reward, stop reason, error, turns and
the whole text. It is the same call TRL makes for its ``log_completions`` table
(``backend.log({name: backend.Table(...)})``), on the main process only, with wandb only while a run is
active. wandb is not a dependency of trl-env: it is imported only when ``report_to`` names it. (trackio,
TRL's other table logger, is left out: it could not be tested here, since installing it downgrades pillow.)
Under several processes the rows of every process are gathered first, so the table shows them all.

Example:
    >>> from trl_env import Episode
    >>> tables = TranscriptTables()
    >>> tables.add(3, [Episode(seed="7", prompt_ids=[1], prompt_text="Guess.", reward=1.0)])
    >>> dict(zip(COLUMNS, tables.rows[0]))  # doctest: +NORMALIZE_WHITESPACE
    {'step': 3, 'process': 0, 'seed': '7', 'reward': 1.0, 'stop_reason': 'running', 'error': '', 'turns': 0,
     'text': 'Guess.'}
    >>> table_loggers(["tensorboard"]), table_loggers("none")
    ([], [])
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

from transformers import TrainerCallback

from trl_env.episode import Episode

TABLE_LOGGERS = ("wandb",)  # report_to loggers taking tables (TRL 1.16 also logs to trackio: untested here)
COLUMNS = ["step", "process", "seed", "reward", "stop_reason", "error", "turns", "text"]
TABLE_NAME = "env/transcripts"


def table_loggers(report_to: str | Sequence[str] | None) -> list[str]:
    """The names in ``report_to`` (a ``TrainingArguments`` value) of loggers that take tables."""
    if report_to is None:
        return []
    names = [report_to] if isinstance(report_to, str) else list(report_to)
    if "all" in names:
        names = [name for name in TABLE_LOGGERS if importlib.util.find_spec(name) is not None]
    return [name for name in TABLE_LOGGERS if name in names]


def episode_row(step: int, process: int, episode: Episode) -> list[Any]:
    """One table row (in :data:`COLUMNS` order): small values first, the whole episode text last."""
    return [
        step,
        process,
        episode.seed,
        episode.reward,
        str(episode.stop_reason),
        episode.error or "",
        episode.num_turns,
        episode.text,
    ]


class TranscriptTables(TrainerCallback):
    """Collects recorded episodes and logs them as one table per logging step to the table loggers.

    Args:
        process_index: this process's rank (a column).
        gather: joins every process's rows (a collective: ``on_log`` runs on every process at the same
            step); the identity on one process.
    """

    def __init__(self, process_index: int = 0, gather: Callable[[list[Any]], list[Any]] | None = None) -> None:
        self.process_index = process_index
        self.gather = gather
        self.rows: list[list[Any]] = []

    def add(self, step: int, episodes: list[Episode]) -> None:
        """Queue rows for ``episodes`` (the ones written to the transcript file) until the next log."""
        self.rows.extend(episode_row(step, self.process_index, e) for e in episodes)

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        rows, self.rows = self.rows, []
        if self.gather is not None:
            rows = self.gather(rows)
        if not rows or not state.is_world_process_zero:
            return
        for name in table_loggers(args.report_to):
            backend = importlib.import_module(name)
            if name == "wandb" and backend.run is None:  # as TRL: the wandb callback has not started a run
                continue
            backend.log({TABLE_NAME: backend.Table(columns=list(COLUMNS), data=rows)})


def attach_tables(trainer: Any) -> TranscriptTables | None:
    """Add a :class:`TranscriptTables` callback to ``trainer`` when its ``report_to`` has a table logger."""
    if not table_loggers(trainer.args.report_to):
        return None
    from trl_env.trainer.trl_compat import gather_objects

    accelerator = trainer.accelerator
    gather = (lambda rows: gather_objects(trainer, rows)) if accelerator.num_processes > 1 else None
    tables = TranscriptTables(accelerator.process_index, gather)
    trainer.add_callback(tables)
    return tables
