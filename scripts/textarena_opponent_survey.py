"""Survey: can the built-in TextArena opponent play every offline two-player game with legal moves only?

For each game class TextArena registers (one id per class), start it for two players offline, then play
``--games`` games with the built-in ``random_move_opponent`` against a "model" that also plays a random
legal move, and count the opponent's illegal moves (the game's "attempted an invalid move" notice) and
forfeits (the game ends with the opponent's ``invalid_move`` flag), the positions where it found no legal
move, the turns it never ended (200 moves in a row), and how the games ended. A game is "legal opponent"
when none of those happened and both seats moved; else "refused" (the adapter refuses it up front).

Usage:
    PYTHONPATH=src python scripts/textarena_opponent_survey.py --games 5 [--only Othello-v0,Nim-v0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence

from textarena.envs.registration import ENV_REGISTRY

from trl_env.adapters.textarena import TextArenaEnv, random_move_opponent
from trl_env.adapters.textarena_opponents import LegalMovePolicy


class CountingOpponent(LegalMovePolicy):
    """The built-in opponent, counting the invalid-move notices the game sends its seat; offered every game."""

    games = None

    def __init__(self) -> None:
        self.notices, self.moves = 0, 0

    def __call__(self, observation: str, moves: Sequence[str]) -> str:
        self.notices += "attempted an invalid move" in observation
        self.moves += 1
        return random_move_opponent(observation, moves)


def one_id_per_class() -> list[str]:
    """The plainest registered id of each game class (``X-v0`` where there is one)."""
    chosen: dict[str, str] = {}
    for game_id, spec in ENV_REGISTRY.items():
        if game_id.endswith(("-train", "-raw")):
            continue
        entry = spec.entry_point if isinstance(spec.entry_point, str) else repr(spec.entry_point)
        best = chosen.get(entry)
        if best is None or (game_id.endswith("-v0") and not best.endswith("-v0")):
            chosen[entry] = game_id
    return sorted(chosen.values())


def survey(game_id: str, games: int, max_steps: int) -> dict[str, object]:
    """Play ``games`` games of ``game_id``; counts of what happened (or why it could not start)."""
    opponent = CountingOpponent()
    row: dict[str, object] = {"game": game_id}
    try:
        env = TextArenaEnv(game_id, opponent=opponent, num_players=2, max_steps=max_steps)
        env.reset("0")
    except Exception as error:  # noqa: BLE001 - the survey reports every reason a game cannot start
        row["status"] = f"cannot start: {type(error).__name__}: {str(error)[:80]}"
        return row
    counts = dict(
        opponent_forfeits=0, no_legal_move=0, opponent_loops=0, model_no_legal_move=0, success=0, loss=0, draw=0, cut=0
    )
    started = time.perf_counter()
    for index in range(games):
        try:
            env, delta = env.reset(str(index))
            model = random.Random(index)  # its own generator: the game draws from the global one
            while env.alive:
                moves = env.legal_moves()
                if not moves:
                    counts["model_no_legal_move"] += 1
                env, delta = env.step(model.choice(moves) if moves else "[0]")
        except RuntimeError as error:
            if "no legal move" not in str(error):
                raise
            counts["no_legal_move"] += 1
            continue
        opponent_seat = 1 - env.player_id
        info = env.game.state.game_info.get(opponent_seat, {})
        counts["opponent_forfeits"] += bool(info.get("invalid_move"))
        if env.truncated and "the opponent made" in delta:
            counts["opponent_loops"] += 1  # its turn never ended (a card game's endless draws)
        elif env.truncated:
            counts["cut"] += 1
        else:
            key = "success" if env.success else ("draw" if env.reward == 0 else "loss")
            counts[key] += 1
    row.update(
        counts,
        opponent_moves=opponent.moves,
        illegal_moves=opponent.notices,
        seconds=round(time.perf_counter() - started, 1),
    )
    bad = row["illegal_moves"] or counts["opponent_forfeits"] or counts["no_legal_move"] or counts["opponent_loops"]
    unproven = not opponent.moves or counts["model_no_legal_move"]  # the random "model" must reach the opponent
    row["status"] = "refused" if bad or unproven else "legal opponent"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--only", default="", help="comma-separated ids (default: one id per registered class)")
    parser.add_argument("--json", default="", help="write the rows here")
    args = parser.parse_args()
    ids = args.only.split(",") if args.only else one_id_per_class()
    rows = []
    for game_id in ids:
        row = survey(game_id, args.games, args.max_steps)
        if str(row["status"]).startswith("cannot start: AssertionError: The number of players has to be 1"):
            continue  # a single-player game
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
