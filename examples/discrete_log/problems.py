"""Deterministic discrete-logarithm problems with a difficulty curriculum.

A seed ``"d<level>-<anything>"`` picks the level (any other seed means level 1); the SHA-256
of the whole seed drives a ``random.Random`` that draws a prime ``p`` in the level's range,
a random primitive root ``g`` modulo ``p`` and an exponent ``x`` in ``[2, p - 2]``; then
``h = g^x mod p``. Because ``g`` is a primitive root, the solutions are exactly the
``x' = x (mod p - 1)``.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from typing import NamedTuple

MAX_LEVEL = 9  # p < 10**21; Miller-Rabin with the bases below is exact for n < 3.3e24
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
_SEED = re.compile(r"d(\d+)-.*", re.DOTALL)


class Problem(NamedTuple):
    level: int
    p: int
    g: int
    x: int
    h: int


def prime_range(level: int) -> tuple[int, int]:
    """The half-open range ``[lo, hi)`` the prime of ``level`` is drawn from.

    Level 1: ``[5, 50)``, 2: ``[50, 1000)``, then ``[10**(3k-6), 10**(3k-3))`` for level ``k``.

    Example:
        >>> [prime_range(k) for k in (1, 2, 3, 4)]
        [(5, 50), (50, 1000), (1000, 1000000), (1000000, 1000000000)]
    """
    if not 1 <= level <= MAX_LEVEL:
        raise ValueError(f"level must be in 1..{MAX_LEVEL}, got {level}")
    if level == 1:
        return 5, 50
    if level == 2:
        return 50, 1000
    return 10 ** (3 * level - 6), 10 ** (3 * level - 3)


def level_of(seed: str) -> int:
    """The level a seed asks for: ``"d3-abc"`` -> 3; seeds without the prefix -> 1."""
    match = _SEED.fullmatch(seed)
    return int(match.group(1)) if match else 1


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for ``n < 3.3e24`` (probabilistic beyond)."""
    if n < 2:
        return False
    for q in _MR_BASES:
        if n % q == 0:
            return n == q
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _MR_BASES:
        y = pow(a, d, n)
        if y in (1, n - 1):
            continue
        for _ in range(s - 1):
            y = y * y % n
            if y == n - 1:
                break
        else:
            return False
    return True


def prime_factors(n: int, rng: random.Random) -> set[int]:
    """The distinct prime factors of ``n >= 1`` (trial division, then Pollard's rho)."""
    factors: set[int] = set()
    for q in range(2, 1000):
        while n % q == 0:
            factors.add(q)
            n //= q
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if is_prime(m):
            factors.add(m)
        else:
            d = _pollard_rho(m, rng)
            stack += [d, m // d]
    return factors


def _pollard_rho(n: int, rng: random.Random) -> int:
    """A non-trivial factor of the odd composite ``n``."""
    while True:
        c, x = rng.randrange(1, n), rng.randrange(2, n)
        y, d = x, 1
        while d == 1:
            x = (x * x + c) % n
            y = (y * y + c) % n
            y = (y * y + c) % n
            d = math.gcd(abs(x - y), n)
        if d != n:
            return d


def problem_for_seed(seed: str) -> Problem:
    """The problem a seed stands for (see the module docstring).

    Example:
        >>> pr = problem_for_seed("d2-example")
        >>> 50 <= pr.p < 1000 and pow(pr.g, pr.x, pr.p) == pr.h
        True
    """
    level = level_of(seed)
    lo, hi = prime_range(level)
    rng = random.Random(int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest(), "big"))
    p = rng.randrange(lo, hi)
    while not is_prime(p):
        p = rng.randrange(lo, hi)
    order_factors = prime_factors(p - 1, rng)
    g = rng.randrange(2, p - 1)
    while any(pow(g, (p - 1) // q, p) == 1 for q in order_factors):
        g = rng.randrange(2, p - 1)
    x = rng.randrange(2, p - 1)
    return Problem(level, p, g, x, pow(g, x, p))
