"""Env classes of the engine tests, in a light module: env workers are processes that import it."""

from __future__ import annotations

import hashlib
import random
import time

BAD_SEEDS = ("b", "d")  # the faulty envs misbehave only for these seeds


class RandomEnv:
    """Lives a random number of turns and answers with random text, some of it long or odd."""

    TEXTS = ["ok", "Higher than 5.", "\nnew line first", "trailing\n\n", "café 日本語", "x" * 300, ""]

    def __init__(self, seed_offset: int = 0):
        self.reward, self.alive = 0.0, True
        self.seed_offset = seed_offset

    def reset(self, seed):
        self.random = random.Random(f"{seed}-{self.seed_offset}")
        self.lifetime = self.random.randint(1, 6)
        return self, self.random.choice(self.TEXTS)

    def step(self, action):
        self.lifetime -= 1
        self.reward = self.random.random()
        self.alive = self.lifetime > 0
        return self, self.random.choice(self.TEXTS)


class Counting:
    def __init__(self, turns=3):
        self.reward, self.alive, self.turn, self.turns = 0.0, True, 0, turns

    def reset(self, seed):
        return self, f"start {seed}"

    def step(self, action):
        self.turn += 1
        self.reward = float(self.turn)
        self.alive = self.turn < self.turns
        return self, f"turn {self.turn}"


class RaisesAtStep2(Counting):
    def reset(self, seed):
        self.seed = seed
        return super().reset(seed)

    def step(self, action):
        if self.turn == 1 and self.seed in BAD_SEEDS:
            raise ConnectionError("backend went away")
        return super().step(action)


class RaisesAtReset(Counting):
    def reset(self, seed):
        if seed in BAD_SEEDS:
            raise ValueError(f"bad seed {seed}")
        return super().reset(seed)


class Hangs(RaisesAtStep2):
    def step(self, action):
        if self.seed in BAD_SEEDS:
            time.sleep(3)
        return Counting.step(self, action)


class ChaosEnv:
    """Random alive/reward/deltas/exceptions, from a seeded plan."""

    def __init__(self, plan):
        self.plan = plan
        self.reward, self.alive = 0.0, True

    def reset(self, seed):
        self.random = random.Random(seed + str(self.plan))
        if self.random.random() < self.plan["reset_error"]:
            raise RuntimeError("reset chaos")
        return self, self.random.choice(["", "go", "\n\n", "<|im_end|>", "x" * 100])

    def step(self, action):
        if self.random.random() < self.plan["step_error"]:
            raise RuntimeError("step chaos")
        self.reward = self.random.uniform(-5, 5)
        self.alive = self.random.random() > self.plan["end"]
        return self, self.random.choice(["", "ok", "\n", "<|im_start|>", "é" * 50])


class ThreeTurnEnv:
    """Three turns; the reward depends on the answers' lengths, so a group's rewards differ."""

    def __init__(self):
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed):
        return self, f"Episode {seed}. Say something."

    def step(self, action):
        self.turn += 1
        self.reward += (len(action) % 5) / 5
        self.alive = self.turn < 3
        return self, f"Turn {self.turn} done."


class SometimesBroken(ThreeTurnEnv):
    """Every other env raises at its second step."""

    count = 0

    def __init__(self):
        super().__init__()
        SometimesBroken.count += 1
        self.broken = SometimesBroken.count % 2 == 0

    def step(self, action):
        if self.broken and self.turn == 1:
            raise TimeoutError("upstream service timed out")
        return super().step(action)


class Countdown:
    def reset(self, seed):
        self.reward, self.alive, self.next = 0.0, True, int(seed)
        return self, f"Count down from {seed}, one number per turn."

    def step(self, action):
        self.reward += action.strip() == str(self.next)
        self.next -= 1
        self.alive = self.next > 0
        return self, "Next." if self.alive else "Done."


class NumberedEnv:
    """The n-th env made in this process scores n (mod 4) in one turn; every fourth (n % 4 == 2) raises at step."""

    made = 0

    def __init__(self):
        self.index = NumberedEnv.made
        NumberedEnv.made += 1
        self.reward, self.alive = 0.0, True

    def reset(self, seed):
        return self, f"Say anything ({seed})."

    def step(self, action):
        if self.index % 4 == 2:
            raise RuntimeError("the game server went away")
        self.reward, self.alive = float(self.index % 4), False
        return self, "Thanks."


class SeedDecides:
    """Seed "flat:R" always scores R (its GRPO group has zero variance); any other seed scores a digest of the answers.

    A tiny random model writes a different answer in every sample, so those groups have variance.
    """

    def __init__(self, turns=1):
        self.turns, self.reward, self.alive = turns, 0.0, True

    def reset(self, seed):
        self.seed, self.turn, self.answers = seed, 0, ""
        return self, f"Say anything ({seed})."

    def step(self, action):
        self.turn += 1
        self.answers += action
        self.alive = self.turn < self.turns
        if self.seed.startswith("flat:"):
            self.reward = float(self.seed.split(":")[1])
        else:
            self.reward = int(hashlib.sha256(self.answers.encode()).hexdigest()[:6], 16) / 16**6
        return self, "Go on." if self.alive else ""


class FailsAtReset:
    """Every reset fails, like the README's Countdown given non-numeric seeds."""

    def reset(self, seed):
        return self, str(int(seed))

    def step(self, action):
        return self, ""


STEP_LOG: dict[str, list[tuple[float, float]]] = {}  # seed -> (start, end) of each step (thread isolation)


class Latency:
    """Lives 2-8 turns; each call sleeps a latency drawn from a heavy-tailed mix, all from the seed.

    Seeds ``slow-*`` sleep ``slow_s`` on every step and ``fast-*`` never do; others draw per call
    from ``mix`` (seconds -> probability). Steps record their start and end times in ``STEP_LOG``.
    """

    def __init__(self, mix=((0.0, 0.7), (0.01, 0.25), (0.1, 0.05)), slow_s=1.0, turns=None):
        self.mix, self.slow_s, self.turns = mix, slow_s, turns
        self.reward, self.alive = 0.0, True

    def reset(self, seed):
        self.seed, self.random = seed, random.Random(seed)
        self.reward, self.alive = 0.0, True  # a reused env (reuse_envs) starts afresh too
        self.lifetime = self.turns or self.random.randint(2, 8)
        self.turn = 0
        STEP_LOG[seed] = []
        return self, f"Play {seed}."

    def _latency(self):
        if self.seed.startswith("slow-"):
            return self.slow_s
        if self.seed.startswith("fast-"):
            return 0.0
        draw, total = self.random.random(), 0.0
        for seconds, probability in self.mix:
            total += probability
            if draw < total:
                return seconds
        return self.mix[-1][0]

    def step(self, action):
        start = time.perf_counter()
        time.sleep(self._latency())
        self.turn += 1
        self.reward += len(action) % 3
        self.alive = self.turn < self.lifetime
        STEP_LOG.setdefault(self.seed, []).append((start, time.perf_counter()))
        return self, f"turn {self.turn}: {action[:10]}"


class EchoesLoneSurrogates(Counting):
    """Answers with text holding a lone surrogate, as an env echoing a model's ``"\\ud800"`` JSON escape does."""

    def reset(self, seed):
        return self, f"start {seed} \ud800"

    def step(self, action):
        env, delta = super().step(action)
        return env, delta + " \udfff end"


class SlowCounting(Counting):
    """Counting whose steps after the first rollout take 2 s: a background rollout is under way when interrupted."""

    def step(self, action):
        time.sleep(2.0)
        return super().step(action)
