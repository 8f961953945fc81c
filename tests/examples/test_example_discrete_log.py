"""DiscreteLogEnv and its problem generator: curriculum, answers, code actions."""

from __future__ import annotations

import pytest

from examples.discrete_log import DiscreteLogEnv, problem_for_seed
from examples.discrete_log.problems import MAX_LEVEL, is_prime, level_of, prime_factors, prime_range
from examples.discrete_log.seeds import heldout_seeds, train_seeds


def code(src: str) -> str:
    return f"Let me compute.\n```python\n{src}\n```"


def test_is_prime_matches_a_sieve():
    n = 20_000
    sieve = [True] * n
    sieve[0] = sieve[1] = False
    for i in range(2, n):
        if sieve[i]:
            sieve[i * i :: i] = [False] * len(range(i * i, n, i))
    assert [k for k in range(n) if is_prime(k)] == [k for k in range(n) if sieve[k]]
    assert is_prime(2**61 - 1) and not is_prime(3215031751) and not is_prime((2**31 - 1) * (2**61 - 1))


def test_prime_factors():
    import random

    rng = random.Random(0)
    assert prime_factors(1, rng) == set()
    assert prime_factors(2**10 * 3 * 997, rng) == {2, 3, 997}
    assert prime_factors((2**31 - 1) * (2**61 - 1) * 10007**2, rng) == {2**31 - 1, 2**61 - 1, 10007}


@pytest.mark.parametrize("level", range(1, MAX_LEVEL + 1))
def test_problems_follow_the_curriculum(level):
    lo, hi = prime_range(level)
    for i in range(5):
        pr = problem_for_seed(f"d{level}-case-{i}")
        assert pr.level == level and lo <= pr.p < hi and is_prime(pr.p)
        assert 2 <= pr.x <= pr.p - 2 and pow(pr.g, pr.x, pr.p) == pr.h
        assert problem_for_seed(f"d{level}-case-{i}") == pr
        if pr.p < 1000:  # g is a primitive root: its order is p - 1
            assert next(k for k in range(1, pr.p) if pow(pr.g, k, pr.p) == 1) == pr.p - 1
        elif pr.p < 10**9:  # same, via the prime factors of p - 1 found by trial division
            assert all(pow(pr.g, (pr.p - 1) // q, pr.p) != 1 for q in _trial_factors(pr.p - 1))


def _trial_factors(n: int) -> set[int]:
    factors, q = set(), 2
    while q * q <= n:
        while n % q == 0:
            factors.add(q)
            n //= q
        q += 1
    return factors | ({n} if n > 1 else set())


def test_level_parsing():
    assert [level_of(s) for s in ["d1-a", "d3-", "d12-x-y", "plain", "d2", "D2-x", "3-x"]] == [1, 3, 12, 1, 1, 1, 1]
    assert problem_for_seed("no prefix").p < 50
    for bad in ["d0-x", f"d{MAX_LEVEL + 1}-x"]:
        with pytest.raises(ValueError):
            DiscreteLogEnv().reset(bad)


def test_prompt_and_correct_answer():
    env, prompt = DiscreteLogEnv().reset("d2-demo")
    assert f"{env.g}^x = {env.h} (mod {env.p})" in prompt and "```python" in prompt and "ANSWER: " in prompt
    env, delta = env.step(f"ANSWER: {env.solution}")
    assert delta.startswith("Correct") and env.reward == 1.0 and env.alive is False and env.solved


@pytest.mark.parametrize("shift", [1, -1, 3])
def test_any_valid_exponent_is_accepted(shift):
    env, _ = DiscreteLogEnv().reset("d3-demo")
    env, _ = env.step(f"ANSWER: {env.solution + shift * (env.p - 1)}")
    assert env.reward == 1.0


def test_wrong_answer_ends_with_zero():
    env, _ = DiscreteLogEnv().reset("d3-demo")
    wrong = next(x for x in range(1, env.p) if pow(env.g, x, env.p) != env.h)
    env, delta = env.step(f"I am sure. answer: {wrong}")
    assert delta.startswith("Wrong:") and env.reward == 0.0 and env.alive is False and env.answered


def test_code_action_returns_output_then_answer_from_it():
    env, _ = DiscreteLogEnv().reset("d2-demo")
    search = f"print(next(x for x in range({env.p}) if pow({env.g}, x, {env.p}) == {env.h}))"
    env, delta = env.step(code(search))
    x = next(x for x in range(env.p) if pow(env.g, x, env.p) == env.h)
    assert delta == f"Exit code 0.\nstdout:\n{x}\n\n3 turns left."
    assert env.alive and env.code_runs == 1 and env.reward == 0.0
    env, _ = env.step(f"The output says ANSWER: {delta.split()[4]}")
    assert env.reward == 1.0 and env.alive is False


def test_code_errors_and_limits_come_back_as_observations():
    env, _ = DiscreteLogEnv(cpu_seconds=1).reset("d1-demo")
    env, delta = env.step(code("1 / 0"))
    assert delta.startswith("Exit code 1.\nstdout: (empty)\nstderr:\nTraceback") and "ZeroDivisionError" in delta
    env, delta = env.step(code("print('x' * 10000)"))
    assert "characters truncated" in delta and len(delta) < 2200
    env, delta = env.step("```py\nwhile True: pass\n```")
    assert delta.startswith("Exit code -") and "(cpu_limit)." in delta.splitlines()[0]
    assert delta.endswith("This is your last turn: answer with ANSWER: <x>.")
    env, delta = env.step(code("print(1)"))
    assert delta.endswith("Out of turns without an answer.") and env.alive is False and env.reward == 0.0
    assert env.code_runs == 4


def test_answer_outside_code_wins_and_answer_inside_code_is_ignored():
    env, _ = DiscreteLogEnv().reset("d1-demo")
    env, delta = env.step(code(f"# ANSWER: {env.solution}\nprint(2)"))
    assert delta.startswith("Exit code 0.\nstdout:\n2") and env.alive
    env, _ = env.step(code("print(1)") + f"\nANSWER: {env.solution}")
    assert env.reward == 1.0 and env.code_runs == 1


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("I need to think.", "No action found"),
        ("ANSWER: unknown", "Could not read your answer"),
        ("ANSWER: " + "9" * 5000, "Could not read your answer"),
    ],
)
def test_unusable_actions_use_a_turn(action, message):
    env, _ = DiscreteLogEnv().reset("d1-demo")
    env, delta = env.step(action)
    assert delta.startswith(message) and delta.endswith("3 turns left.") and env.turns == 1 and env.alive


def test_seed_lists():
    train = train_seeds(30, rng_seed=0, levels=(1, 2, 3))
    assert len(set(train)) == 30 and train == train_seeds(30, rng_seed=0, levels=(1, 2, 3))
    assert [level_of(s) for s in train[:3]] == [1, 2, 3]
    held = heldout_seeds(10)
    assert len(held) == 30 and not set(held) & set(train)
