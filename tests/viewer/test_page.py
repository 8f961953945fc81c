"""The page file: what it embeds, what it rejects, and that 10,000 episodes build fast into a modest file."""

import doctest
import html
import json
import re
import time

import pytest

import trl_env.viewer
from tests.viewer.conftest import many
from trl_env.viewer import page, write_page


def embedded(path) -> dict:
    """The JSON data block of a written page, parsed as the browser would."""
    text = path.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="trl-env-data">(.*?)</script>', text, re.S)
    return json.loads(match.group(1))


def test_page_embeds_every_record_compactly(tmp_path, records):
    data = embedded(write_page(records, tmp_path / "v.html", title="Tiny <run>"))
    assert data["title"] == "Tiny <run>"
    assert len(data["episodes"]) == len(records)
    for record, episode in zip(records, data["episodes"], strict=True):
        assert episode["tt"] == record["token_texts"] and episode["ids"] == record["completion_ids"]
        assert [int(k != "1") for k in episode["k"]] == [1 - m for m in record["env_mask"]]
        assert episode["k"].count("2") == sum(
            s["end"] - s["start"] for s in record["segments"] if s["source"] == "turn_end"
        )
        assert all(abs(a - b) <= 5e-4 for a, b in zip(episode["lp"], record["logprobs"], strict=True))
        assert data["prompts"][episode["p"]] == record["prompt_text"]
        # keys the page has no place for (env metrics, user extras) travel to its "other fields" table
        assert episode["extra"] == {"secret": record["secret"], "metrics": record["metrics"]}
    assert len(data["prompts"]) < len(records)  # identical prompts are stored once


def test_page_is_self_contained_and_cannot_be_broken_out_of(tmp_path, records):
    hostile = dict(records[0], seed="</script><script>alert(1)</script>", error="<!-- & -->", note="<b>x</b>")
    path = write_page([hostile], tmp_path / "v.html", title="<script>t</script>")
    text = path.read_text(encoding="utf-8")
    assert "alert(1)</script>" not in text and "<!--" not in text
    assert "<title>&lt;script&gt;t&lt;/script&gt;</title>" in text
    assert embedded(path)["episodes"][0]["seed"] == hostile["seed"]
    # no external resource of any kind: no src=/href= attributes, no URLs in the code
    assert not re.search(r"\b(src|href)\s*=", text)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html.unescape(text))


def test_page_tolerates_missing_extra_and_non_finite_values(tmp_path):
    odd = [
        {"seed": 1, "reward": float("nan"), "metrics": {"acc": float("inf"), "n": 2}, "text": "old transcript"},
        {"seed": "b", "completion_ids": [7, 8], "env_mask": [1, 0], "logprobs": [-1.0, 0.0], "step": 3},
    ]
    data = embedded(write_page(odd, tmp_path / "v.html"))
    first, second = data["episodes"]
    assert (first["seed"], first["reward"], first["extra"]) == ("1", None, {"metrics": {"acc": None, "n": 2}})
    assert first["text"] == "old transcript" and first["p"] is None
    assert second["tt"] == ["⟨7⟩", "⟨8⟩"] and second["k"] == "10"  # no token texts: ids stand in


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"env_mask": [1]}, r"record 0 \(seed '3'\): completion_ids has \d+ entries but env_mask has 1"),
        ({"env_mask": None}, "has completion_ids but no env_mask"),
        ({"logprobs": "x"}, "logprobs must be a list, got str"),
        ({"reward": "high"}, "reward must be a number, got 'high'"),
        ({"step": 1.5}, "step must be an integer or null"),
        ({"segments": [{"start": 0, "end": 1, "source": "image"}]}, r"segments\[0\] has source 'image'"),
        ({"segments": [{"start": 0, "end": 10_000, "source": "env"}]}, r"segments\[0\] spans 0\.\.10000"),
        ({"turns": ["hi"]}, r"turns\[0\] must be an object"),
    ],
)
def test_page_names_the_malformed_record_and_field(tmp_path, records, change, message):
    with pytest.raises(ValueError, match=message):
        write_page([dict(records[0], **change)], tmp_path / "v.html")


def test_bad_values_inside_token_lists_are_located(tmp_path, records):
    record = records[0]
    mask = list(record["env_mask"])
    mask[2] = 2
    with pytest.raises(ValueError, match="env_mask holds values other than 0 and 1"):
        write_page([dict(record, env_mask=mask)], tmp_path / "v.html")
    logprobs = list(record["logprobs"])
    logprobs[4] = float("nan")
    with pytest.raises(ValueError, match=r"logprobs\[4\] must be a finite number, got nan"):
        write_page([dict(record, logprobs=logprobs)], tmp_path / "v.html")
    with pytest.raises(ValueError, match="record 1 .*token_texts must all be strings"):
        write_page([record, dict(record, token_texts=[None] * len(record["token_texts"]))], tmp_path / "v.html")


def test_ten_thousand_episodes_build_fast_into_a_modest_page(tmp_path, records):
    big = many(records, 10_000)
    tokens = sum(len(r["completion_ids"]) for r in big)
    start = time.perf_counter()
    path = write_page(big, tmp_path / "big.html")
    seconds = time.perf_counter() - start
    size = path.stat().st_size
    raw = sum(len(json.dumps(r)) for r in big)
    print(f"10,000 episodes, {tokens} tokens: {seconds:.2f} s, {size / 1e6:.1f} MB (records {raw / 1e6:.1f} MB)")
    assert seconds < 10.0  # about 2 s on a busy 2-core machine
    assert size < 0.5 * raw  # compact form: well under the records' own JSON
    assert size < 1_000 + 40 * tokens + 600 * len(big)  # bytes per token and per episode stay bounded


@pytest.mark.parametrize("module", [page, trl_env.viewer])
def test_docstring_examples(module):
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0
