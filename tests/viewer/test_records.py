"""Records of real episodes: token texts, segment sources, schema, JSONL reading."""

import doctest
import json
import random

import pytest

from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.testing import InstantGenerator
from trl_env.viewer import episode_record, read_records, records, token_texts

SCHEMA = {
    "seed", "step", "reward", "stop_reason", "error", "num_turns", "success", "turn_rewards", "prompt_text",
    "prompt_ids", "completion_ids", "env_mask", "logprobs", "token_texts", "segments", "turns", "parse_failures",
    "metrics",
}  # fmt: skip


@pytest.mark.parametrize("text", ["🦜 parrot", "𝔘𝔫𝔦code", "🧑‍🚀 crew", "鬱ꙮ", "café\n日本語 <|im_end|>"])
def test_token_texts_keep_split_characters_whole(qwen3_tokenizer, text):
    ids = qwen3_tokenizer.encode(text)
    texts = token_texts(ids, qwen3_tokenizer)
    assert "".join(texts) == qwen3_tokenizer.decode(ids) == text
    assert "\ufffd" not in "".join(texts)
    assert len(texts) == len(ids)
    # a byte-split character sits whole on the token that completes it; the tokens before it are empty
    if qwen3_tokenizer.decode(ids[:1]) == "\ufffd":
        assert texts[0] == ""


def test_token_texts_of_random_ids_join_to_the_decoded_text(qwen3_tokenizer):
    rng = random.Random(0)
    for _ in range(20):
        ids = [rng.randrange(len(qwen3_tokenizer)) for _ in range(rng.randint(1, 40))]
        assert "".join(token_texts(ids, qwen3_tokenizer)) == qwen3_tokenizer.decode(ids)


def test_token_texts_fall_back_when_decoding_is_not_additive():
    class Spacey:  # like SentencePiece: a decoded text never starts with a space
        def decode(self, ids, **kwargs):
            return "".join(" w" for _ in ids).lstrip()

    assert token_texts([1, 2, 3], Spacey()) == ["w", " w", " w"]


def _episodes(tokenizer, **config):
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = InstantGenerator(range(100, 5000), stop_id=im_end, stop_prob=0.3, seed=1)
    engine = RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, RolloutConfig(**config))

    class Env:
        def __init__(self):
            self.reward, self.alive, self.turns = 0.0, True, 0

        def reset(self, seed):
            return self, f"Seed {seed}: say anything. 🦜"

        def step(self, action):
            self.turns += 1
            self.reward, self.alive = self.turns / 4, self.turns < 4
            return self, f"turn {self.turns} ok"

    return engine.run(Env, [f"s{i}" for i in range(12)])


def test_episode_record_schema_and_turn_ends(qwen3_tokenizer):
    episodes = _episodes(qwen3_tokenizer, max_turns=4, max_turn_tokens=4, max_completion_tokens=200)
    im_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    seen_turn_end = 0
    for episode in episodes:
        record = episode_record(episode, qwen3_tokenizer, step=7)
        assert set(record) == SCHEMA
        assert json.loads(json.dumps(record)) == record  # JSON-ready
        assert record["step"] == 7 and record["num_turns"] == episode.num_turns
        assert "".join(record["token_texts"]) == qwen3_tokenizer.decode(episode.completion_ids)
        for segment in record["segments"]:
            ids = record["completion_ids"][segment["start"] : segment["end"]]
            mask = record["env_mask"][segment["start"] : segment["end"]]
            assert set(mask) == {1 if segment["source"] == "model" else 0}
            if segment["source"] == "turn_end":
                seen_turn_end += 1
                assert ids == [im_end]
        # an engine-added end of turn is exactly a turn the model did not stop itself (and that was not the last)
        closed = sum(1 for s in record["segments"] if s["source"] == "turn_end")
        unstopped = [not t["stopped"] for t in record["turns"]]
        assert closed in (sum(unstopped), sum(unstopped) - 1)
        # without turn_end, the tokenizer's special tokens are looked for: same answer here
        assert episode_record(episode, qwen3_tokenizer)["segments"] == record["segments"]
    assert seen_turn_end > 0


def test_episode_record_rejects_bad_arguments(qwen3_tokenizer):
    (episode, *_) = _episodes(qwen3_tokenizer, max_turns=2, max_turn_tokens=4)
    with pytest.raises(ValueError, match="turn_rewards for 2 turns"):
        episode_record(episode, qwen3_tokenizer, turn_rewards=[1.0])
    with pytest.raises(ValueError, match="extra key 'reward'"):
        episode_record(episode, qwen3_tokenizer, extra={"reward": 2})
    with pytest.raises(ValueError, match="tokenizer is needed"):
        episode_record(episode, None)
    record = episode_record(episode, qwen3_tokenizer, success=True, turn_rewards=[0.25, None], extra={"m": 1})
    assert (record["success"], record["turn_rewards"], record["m"]) == (True, [0.25, None], 1)


def test_read_records_round_trip_and_errors(tmp_path, qwen3_tokenizer):
    written = [episode_record(e, qwen3_tokenizer) for e in _episodes(qwen3_tokenizer, max_turns=2)]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in written[:5]) + "\n")
    second.write_text("".join(json.dumps(r) + "\n" for r in written[5:]))
    assert read_records([first, second]) == written
    assert read_records(str(first)) == written[:5]
    second.write_text(json.dumps(written[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"b\.jsonl:2: not valid JSON"):
        read_records([first, second])
    with pytest.raises(FileNotFoundError):
        read_records(tmp_path / "missing.jsonl")


def test_docstring_examples():
    assert doctest.testmod(records, optionflags=doctest.ELLIPSIS).failed == 0
