"""Guess-the-number's two rewards: the shaped ratio (the original) and information gain.

trl-env credits turn ``t`` with the change of ``Env.reward`` that turn caused
(:mod:`trl_env.trainer.advantages`), so an env's ``reward`` after each step is a cumulative sum of
per-turn rewards, and its per-turn differences only mean something if the reward is built as a sum.

``"ratio"`` (the original, the default)
    ``1 x solved + (0.1 x valid + 0.2 x consistent) / turns``: a score of the episode so far,
    recomputed each turn. Its per-turn changes are not rewards of the turn: a good guess after good
    guesses changes nothing, a consistent guess after an inconsistent one raises it, and success only
    shows on the last turn.
``"info_gain"``
    Additive: each guess earns the information it gains about the secret, the log2 of the factor by
    which it shrinks the set of secrets consistent with all feedback so far, divided by log2 of the
    initial range; the guess that finds the secret also earns ``success_bonus`` (1.0). The sum
    telescopes, so after any turn::

        reward = success_bonus x solved + log2(N / candidates) / log2(N)

    with ``N = high - low + 1`` and ``candidates`` the secrets still possible (1 once solved). An
    episode that pins the secret down gains 1 in total, however it got there; a solved episode
    scores 2.0. A guess outside the candidates (inconsistent, repeated) or an invalid answer gains
    exactly 0: the feedback tells nothing new. There is no penalty on top, because the wasted turn
    already costs the information it did not gain (under turn credit it is compared with other
    episodes' gains at the same turn, so its advantage is negative) and a turn fewer to succeed in;
    a penalty would make the total mean something other than "bits learned + solved".

Example:
    >>> info_gain_reward(solved=False, candidates=8, size=16)
    0.25
    >>> info_gain_reward(solved=True, candidates=1, size=16)
    2.0
    >>> ratio_reward(solved=True, valid=4, consistent=4, turns=4)
    1.3
"""

from __future__ import annotations

import math

REWARDS: tuple[str, ...] = ("ratio", "info_gain")  # the first is the default
SUCCESS_BONUS = 1.0  # what finding the secret adds under "info_gain": as much as all the information


def ratio_reward(solved: bool, valid: int, consistent: int, turns: int) -> float:
    """The original shaped reward: ``1 x solved + (0.1 x valid + 0.2 x consistent) / turns``; 0.0 before a turn.

    Args:
        solved: whether the secret was guessed.
        valid: guesses that were integers in range.
        consistent: valid guesses still possible given the earlier feedback.
        turns: answers so far, invalid ones included.

    Returns:
        The reward, rounded to 9 decimals so that 1.3 prints as 1.3.

    Example:
        >>> ratio_reward(solved=False, valid=1, consistent=0, turns=2)
        0.05
    """
    if turns == 0:
        return 0.0
    return round(float(solved) + (0.1 * valid + 0.2 * consistent) / turns, 9)


def information(candidates: int, size: int) -> float:
    """What is known of the secret: ``log2(size / candidates) / log2(size)``, in [0, 1] (0 when ``size`` is 1).

    Args:
        candidates: secrets still consistent with the feedback (>= 1).
        size: secrets possible at the start (``high - low + 1``).

    Returns:
        0.0 when nothing is known, 1.0 when the secret is pinned down.

    Example:
        >>> information(4, 16), information(1, 16), information(16, 16)
        (0.5, 1.0, 0.0)
    """
    if size <= 1:
        return 0.0  # nothing to learn: a one-number game has no information to gain
    return math.log2(size / candidates) / math.log2(size)


def info_gain_reward(solved: bool, candidates: int, size: int, success_bonus: float = SUCCESS_BONUS) -> float:
    """The cumulative information-gain reward: ``success_bonus x solved + information(candidates, size)``.

    Its change over one turn is that turn's information gain (plus the bonus on the solving turn).

    Args:
        solved: whether the secret was guessed (then ``candidates`` is 1).
        candidates: secrets still consistent with the feedback.
        size: secrets possible at the start.
        success_bonus: added once the secret is found.

    Returns:
        The reward, rounded to 9 decimals (so per-turn differences of exact binary steps are exact).

    Example:
        >>> info_gain_reward(solved=False, candidates=1, size=16)  # pinned down, not yet said
        1.0
    """
    return round(success_bonus * float(solved) + information(candidates, size), 9)
