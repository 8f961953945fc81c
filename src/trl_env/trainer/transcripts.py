"""Recording training transcripts: the episodes of every N-th step, to JSONL, off the hot path.

Each record is the viewer's (:func:`trl_env.viewer.episode_record`): seed, step, reward, turn
rewards, stop reason, error, each turn's text/action/observation, and the token ids with their
mask and logprobs. Records are built and written by a background thread, so a training step only
pays for handing the episodes over. Every process writes its own file (``transcripts.jsonl`` on
process 0, ``transcripts.rank1.jsonl`` ...); a file that grows past ``max_bytes`` is rotated once
(to ``.1``, replacing the previous one), so at most about twice ``max_bytes`` stay on disk per process.
Open them with ``trl-env view OUTPUT_DIR/transcripts*.jsonl``.

Example:
    >>> import tempfile
    >>> from trl_env import Episode
    >>> recorder = TranscriptRecorder(tempfile.mkdtemp(), tokenizer, every=2, per_step=1)
    >>> episodes = [Episode(seed=s, prompt_ids=[1], prompt_text="p") for s in "ab"]
    >>> [recorder.record(step, episodes) for step in (0, 1, 2)]
    [True, False, True]
    >>> recorder.close()
    >>> [(r["step"], r["seed"]) for r in read_records(recorder.path)]
    [(0, 'a'), (2, 'a')]
"""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trl_env.episode import Episode
from trl_env.errors import BackendError, ConfigError
from trl_env.viewer.records import episode_record, read_records

__all__ = ["FlushTranscripts", "TranscriptRecorder", "read_records"]


class TranscriptRecorder:
    """Writes the episodes of every ``every``-th step (``per_step`` of them; None: all) to a JSONL file.

    Args:
        output_dir: the folder of the file.
        tokenizer: decodes the token texts shown by the viewer.
        every: record steps 0, every, 2*every, ...
        per_step: episodes recorded per step (the first ones, which cover the first groups); None for all.
        process_index: this process's rank; names the file.
        max_bytes: rotate the file past this size.
    """

    def __init__(
        self,
        output_dir: str | Path,
        tokenizer: Any,
        *,
        every: int = 1,
        per_step: int | None = 4,
        process_index: int = 0,
        max_bytes: int = 64 * 2**20,
    ) -> None:
        if every < 1 or (per_step is not None and per_step < 1):
            raise ConfigError(f"every and per_step must be >= 1, got every={every}, per_step={per_step}")
        self.tokenizer, self.every, self.per_step, self.max_bytes = tokenizer, every, per_step, max_bytes
        name = "transcripts.jsonl" if process_index == 0 else f"transcripts.rank{process_index}.jsonl"
        self.path = Path(output_dir) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: queue.Queue[tuple[int, list[Episode]] | None] = queue.Queue()
        self._error: BaseException | None = None
        # a daemon thread: a crashed or interrupted run never waits on it at exit
        self._thread = threading.Thread(target=self._work, name="trl-env-transcripts", daemon=True)
        self._thread.start()

    def record(self, step: int, episodes: list[Episode]) -> bool:
        """Queue this step's episodes if it is a recorded step; returns whether it was."""
        if self._error is not None:
            raise BackendError(f"writing transcripts to {self.path} failed") from self._error
        if step % self.every:
            return False
        chosen = episodes if self.per_step is None else episodes[: self.per_step]
        self._queue.put((step, list(chosen)))
        return True

    def close(self) -> None:
        """Write what is queued and stop the thread (idempotent)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                step, episodes = item
                lines = "".join(
                    json.dumps(episode_record(e, self.tokenizer, step=step), ensure_ascii=False) + "\n"
                    for e in episodes
                )
                if self.path.exists() and self.path.stat().st_size + len(lines) > self.max_bytes:
                    self.path.replace(self.path.with_suffix(".jsonl.1"))
                with open(self.path, "a", encoding="utf-8") as out:
                    out.write(lines)
            except BaseException as error:  # reported by the next record() call, in the training thread
                self._error = error


class FlushTranscripts(TrainerCallback):
    """Closes a :class:`TranscriptRecorder` when training ends, so that every queued step is on disk."""

    def __init__(self, recorder: TranscriptRecorder) -> None:
        self.recorder = recorder

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.recorder.close()
