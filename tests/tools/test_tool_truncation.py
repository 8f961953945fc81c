"""Tool results are env text: each is cut at ``max_env_tokens`` with the delta's marker, inside its tool message."""

from __future__ import annotations

from tests.tools.envs import LOG_LINE, LogReader
from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.core import ToolResult
from trl_env.episode import SegmentKind
from trl_env.testing import InstantGenerator


def test_a_huge_tool_result_is_cut_with_a_marker(qwen3_tokenizer):
    end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = InstantGenerator(range(100, 3000), stop_id=end, stop_prob=0.5)
    config = RolloutConfig(max_turns=3, max_turn_tokens=8, max_env_tokens=50, env_isolation="thread")
    engine = RolloutEngine(generator, ChatTemplateProcessor(qwen3_tokenizer), qwen3_tokenizer, config)
    try:
        (episode,) = engine.run(LogReader, ["a"])
    finally:
        engine.close()
    episode.check(qwen3_tokenizer)
    tool_segments = [s for s in episode.segments if s.kind == SegmentKind.TOOL]
    assert len(tool_segments) == 2  # after turns 1 and 2; turn 3 ends the episode (max_turns)
    full_log = LOG_LINE * 2000
    dropped = len(qwen3_tokenizer.encode(full_log, add_special_tokens=False)) - 50
    kept = engine.encoder.truncate(full_log, 50)
    assert kept.endswith(f"\n[... {dropped} tokens truncated]") and dropped > 10_000
    # the cut result is rendered as a tool message by the template, like any result
    ids, text = engine.encoder.env_turn("", [ToolResult("ping", kept)], close_turn=False)
    for segment in tool_segments:
        assert segment.text == text and episode.completion_ids[segment.start : segment.end] == ids
        assert all(mask == 0 for mask in episode.env_mask[segment.start : segment.end])
    assert len(ids) < 50 + 30  # the cut result, its marker and the tool message's markup
