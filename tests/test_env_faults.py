"""Environments that raise, hang or lie; the fault policy; validation; huge deltas."""

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.envs.basic import ChaosEnv, Counting, Hangs, RaisesAtReset, RaisesAtStep2  # noqa: F401
from trl_env import ChatTemplateProcessor, EnvContractError, EnvError, RolloutConfig, RolloutEngine
from trl_env.testing import InstantGenerator


def _engine(tokenizer, stop_prob=1.0, **config):
    generator = InstantGenerator(
        range(100, 3000), stop_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), stop_prob=stop_prob
    )
    return RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, RolloutConfig(**config))


# The faulty envs below misbehave only for the seeds "b" and "d": the others run as Counting does.


def _mixed_factory(bad_cls):
    return bad_cls  # module-level classes: they run in worker processes


@pytest.mark.parametrize("bad", [RaisesAtStep2, RaisesAtReset])
def test_a_raising_env_fails_only_its_episode(qwen3_tokenizer, bad):
    episodes = _engine(qwen3_tokenizer, max_turns=3, failure_reward=-1.0).run(_mixed_factory(bad), list("abcd"))
    good, failed = episodes[0::2], episodes[1::2]
    assert all(e.stop_reason == "done" and e.reward == 3.0 for e in good)
    for episode in failed:
        assert episode.stop_reason == "env_error" and episode.reward == -1.0
        assert bad.__name__ in episode.error and f"seed={episode.seed!r}" in episode.error
        assert ("ConnectionError" if bad is RaisesAtStep2 else "ValueError") in episode.error
        episode.check(qwen3_tokenizer)
    assert "turn=2" in failed[0].error if bad is RaisesAtStep2 else "turn=0" in failed[0].error


def test_a_hanging_env_times_out_and_the_batch_goes_on(qwen3_tokenizer):
    start = time.perf_counter()
    episodes = _engine(qwen3_tokenizer, max_turns=2, env_timeout=0.3).run(_mixed_factory(Hangs), list("ab"))
    assert time.perf_counter() - start < 2.5
    assert episodes[0].stop_reason == "max_turns"
    assert episodes[1].stop_reason == "env_error" and "timeout" in episodes[1].error


def test_raise_policy_names_class_seed_and_turn(qwen3_tokenizer):
    engine = _engine(qwen3_tokenizer, max_turns=3, on_env_error="raise")
    with pytest.raises(EnvError, match=r"RaisesAtStep2 \(seed='b', turn=2\).*ConnectionError: backend went away"):
        engine.run(_mixed_factory(RaisesAtStep2), list("ab"))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("reward", float("nan"), r"Liar.reward after step\(seed='a'\) is nan, expected a finite float"),
        ("reward", "1.0", r"Liar.reward after step\(seed='a'\) is '1.0', expected a finite float"),
        ("alive", 1, r"Liar.alive after step\(seed='a'\) is 1, expected a bool"),
        ("delta", None, r"Liar.step\(seed='a'\) returned a 2-tuple whose delta is NoneType, expected str"),
        ("tuple", None, r"Liar.step\(seed='a'\) returned Liar, expected a tuple \(env, delta\)"),
    ],
)
def test_contract_violations_are_clear_errors(qwen3_tokenizer, field, value, message):
    class Liar(Counting):
        def step(self, action):
            super().step(action)
            if field == "delta":
                return self, value
            if field == "tuple":
                return self
            setattr(self, field, value)
            return self, "ok"

    with pytest.raises(EnvContractError, match=message):
        _engine(qwen3_tokenizer, max_turns=3).run(Liar, ["a"])


def test_env_steps_of_a_turn_run_concurrently(qwen3_tokenizer):
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    class Slow(Counting):
        def step(self, action):
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            time.sleep(0.05)
            with lock:
                state["now"] -= 1
            return super().step(action)

    _engine(qwen3_tokenizer, max_turns=2, env_workers=8).run(Slow, [str(i) for i in range(8)])
    assert state["peak"] > 1


def test_huge_deltas_are_cut_with_a_marker(qwen3_tokenizer):
    class Flood(Counting):
        def step(self, action):
            super().step(action)
            return self, "flood " * 5000

    (episode,) = _engine(qwen3_tokenizer, max_turns=2, max_env_tokens=50, max_completion_tokens=500).run(Flood, ["a"])
    assert episode.turns[0].observation.endswith("tokens truncated]")
    env_tokens = len(episode.env_mask) - sum(episode.env_mask)
    assert env_tokens < 50 + 40
    episode.check(qwen3_tokenizer)


@pytest.mark.parametrize(
    ("stop_prob", "expected_stopped"),
    [(1.0, True), (0.0, False)],  # 1.0: empty answer (only the stop token); 0.0: never stops
)
def test_empty_and_unstopped_model_output(qwen3_tokenizer, stop_prob, expected_stopped):
    actions = []

    class Recorder(Counting):
        def step(self, action):
            actions.append(action)
            return super().step(action)

    (episode,) = _engine(qwen3_tokenizer, stop_prob=stop_prob, max_turns=2, max_turn_tokens=4).run(Recorder, ["a"])
    assert [t.stopped for t in episode.turns] == [expected_stopped] * 2
    if expected_stopped:
        assert actions == ["", ""]
        assert episode.parse_failures == 2  # an empty answer is counted as a parse failure
    episode.check(qwen3_tokenizer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.fixed_dictionaries(
        {
            "reset_error": st.sampled_from([0.0, 0.3]),
            "step_error": st.sampled_from([0.0, 0.2, 0.5]),
            "end": st.floats(0.0, 1.0),
        }
    ),
    n=st.integers(1, 6),
    max_turns=st.integers(1, 5),
    budget=st.integers(1, 120),
    stop_prob=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_fuzz_engine_with_chaotic_envs(qwen3_tokenizer, plan, n, max_turns, budget, stop_prob):
    engine = _engine(
        qwen3_tokenizer,
        stop_prob=stop_prob,
        max_turns=max_turns,
        max_turn_tokens=5,
        max_completion_tokens=budget,
        failure_reward=-9.0,
    )
    episodes = engine.run(lambda: ChaosEnv(plan), [f"s{i}" for i in range(n)])
    assert len(episodes) == n
    for episode in episodes:
        episode.check(qwen3_tokenizer)
        assert len(episode.completion_ids) <= budget
        assert episode.stop_reason in {"done", "max_turns", "token_budget", "env_error"}
        assert (episode.stop_reason == "env_error") == (episode.error is not None)
        if episode.stop_reason == "env_error":
            assert episode.reward == -9.0


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_env_text_with_lone_surrogates_is_tokenized_with_replacement_characters(qwen3_tokenizer, isolation):
    from tests.envs.basic import EchoesLoneSurrogates

    engine = _engine(qwen3_tokenizer, max_turns=3, env_isolation=isolation)
    episodes = engine.run(EchoesLoneSurrogates, ["a", "b"])
    for episode in episodes:
        assert not episode.failed and episode.num_turns == 3, episode.error
        assert "start a \ufffd" in episode.prompt_text or "start b \ufffd" in episode.prompt_text
        assert all(turn.observation.endswith("\ufffd end") for turn in episode.turns if turn.observation)
        episode.check(qwen3_tokenizer)
