"""The page in a real headless Chromium, opened from file://: colours, filters, search, no network, 10k episodes.

Needs Debian's ``chromium`` and ``chromium-driver`` packages and the ``selenium`` package.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter

import pytest

from tests.viewer.browser import have_chromium, start_chromium
from tests.viewer.conftest import many
from trl_env.viewer import write_page

# `make test` installs chromium and sets TRL_ENV_REQUIRE_BROWSER=1: there a missing browser fails, never skips
if os.environ.get("TRL_ENV_REQUIRE_BROWSER") == "1" and not have_chromium():
    raise RuntimeError("TRL_ENV_REQUIRE_BROWSER=1 but /usr/bin/chromium or /usr/bin/chromedriver is missing")
pytestmark = pytest.mark.skipif(
    not have_chromium(), reason="needs Debian's chromium and chromedriver: apt-get install chromium chromium-driver"
)

COLOURS = """
const css = (el) => getComputedStyle(el).backgroundColor;
return {
  tokens: [...document.querySelectorAll('#detail .tokens .tok')].map(css),
  texts: [...document.querySelectorAll('#detail .tokens .tok')].map((t) => t.textContent.replace(/↵\\n/g, '\\n')),
  legend: [...document.querySelectorAll('#detail .legend .swatch')].map(css),
};
"""


@pytest.fixture(scope="module")
def driver():
    browser = start_chromium()
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def page_url(records, tmp_path_factory) -> str:
    return write_page(records, tmp_path_factory.mktemp("page") / "view.html", title="tiny rollout").as_uri()


def open_page(driver, url: str) -> None:
    driver.get_log("performance")  # drop what earlier pages logged
    driver.get(url)


def rows(driver) -> list:
    return driver.find_elements("css selector", "#spacer .row")


def count_text(driver) -> str:
    return driver.find_element("id", "count").text


def searchable(record: dict) -> str:
    """What the page's search looks through, lower-cased."""
    turns = [str(t.get(k) or "") for t in record["turns"] for k in ("reasoning", "action", "observation")]
    fields = [
        record["seed"],
        record["stop_reason"],
        record["error"] or "",
        record["prompt_text"],
        *record["token_texts"],
    ]
    return "\n".join(fields + turns + [json.dumps(record.get("secret"))]).lower()


def shown(driver, expected: int) -> list:
    """The rows once the list shows ``expected`` episodes (typing is debounced), failing after 3 s."""
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, 3).until(lambda d: count_text(d).startswith(f"{expected} of "))
    except Exception:
        raise AssertionError(f"the list shows {count_text(driver)!r}, expected {expected} episodes") from None
    return rows(driver)


def test_tokens_are_shown_in_the_colour_of_their_mask(driver, page_url, records):
    open_page(driver, page_url)
    assert len(rows(driver)) == len(records)
    for index, record in enumerate(records):
        driver.find_element("css selector", f'#spacer .row[data-i="{index}"]').click()
        shown = driver.execute_script(COLOURS)
        model, env, turn_end = shown["legend"]
        assert len({model, env, turn_end}) == 3
        counts = Counter(shown["tokens"])
        ones = sum(record["env_mask"])
        zeros = len(record["env_mask"]) - ones
        assert counts[model] == ones and counts[env] + counts[turn_end] == zeros, (index, counts)
        ends = sum(s["end"] - s["start"] for s in record["segments"] if s["source"] == "turn_end")
        assert counts[turn_end] == ends
        assert [c == model for c in shown["tokens"]] == [m == 1 for m in record["env_mask"]]  # token by token
        assert shown["texts"] == record["token_texts"]
    assert any(s["source"] == "turn_end" for r in records for s in r["segments"])  # the case was exercised


def test_logprob_mode_heats_sampled_tokens_and_the_hover_shows_the_value(driver, page_url, records):
    from selenium.webdriver import ActionChains

    open_page(driver, page_url)
    record = records[0]
    driver.find_element("css selector", '.modes button[data-mode="heat"]').click()
    colours = driver.execute_script(COLOURS)["tokens"]
    model = [c for c, m in zip(colours, record["env_mask"], strict=True) if m]
    env = {c for c, m in zip(colours, record["env_mask"], strict=True) if not m}
    # the colour is a function of the heat, sqrt(-logprob / 12) to 2 decimals, as the legend says
    heats = [
        f"{math.sqrt(min(1, max(0, -lp / 12))):.2f}"
        for lp, m in zip(record["logprobs"], record["env_mask"], strict=True)
        if m
    ]
    assert len(set(model)) == len(set(heats)) > 1
    assert all(len({c for c, h in zip(model, heats, strict=True) if h == heat}) == 1 for heat in heats)
    assert "rgba(0, 0, 0, 0)" in env and not env & set(model)
    first = record["env_mask"].index(1)
    token = driver.find_element("css selector", f'#detail .tok[data-i="{first}"]')
    ActionChains(driver).move_to_element(token).perform()
    tip = driver.find_element("id", "tip").text
    assert f"logprob {record['logprobs'][first]:.3f}" in tip and f"id {record['completion_ids'][first]}" in tip
    driver.find_element("css selector", '.modes button[data-mode="mask"]').click()


def test_filters_and_search_change_the_list(driver, page_url, records):
    from selenium.webdriver.support.ui import Select

    open_page(driver, page_url)
    total = len(records)
    by_stop = Counter(r["stop_reason"] for r in records)
    assert count_text(driver) == f"{total} of {total} episodes"
    Select(driver.find_element("id", "f-stop")).select_by_value("env_error")
    assert count_text(driver) == f"{by_stop['env_error']} of {total} episodes"
    assert len(rows(driver)) == by_stop["env_error"] and all("env_error" in r.text for r in rows(driver))
    driver.find_element("id", "f-reset").click()
    driver.find_element("css selector", '.bar-row[data-stop="done"]').click()  # the summary's bars filter too
    assert len(rows(driver)) == by_stop["done"]
    driver.find_element("id", "f-reset").click()
    driver.find_element("id", "f-step-min").send_keys("1")
    later = sum(r["step"] >= 1 for r in records)
    assert 0 < later < total and len(shown(driver, later)) == later
    driver.find_element("id", "f-reward-max").send_keys("-1")
    assert shown(driver, 0) == []
    driver.find_element("id", "f-reset").click()
    search = driver.find_element("id", "f-search")
    search.send_keys("SCOREBOARD unavailable")  # the env error's message, any case
    assert [r.get_attribute("data-i") for r in shown(driver, 2)] == [
        str(i) for i, r in enumerate(records) if "scoreboard unavailable" in (r["error"] or "")
    ]
    search.clear()
    written = "".join(t for t, m in zip(records[3]["token_texts"], records[3]["env_mask"], strict=True) if m)
    written = written.strip()[:12]  # text the model wrote; set by script: it may hold characters keys cannot type
    driver.execute_script(
        "const s = arguments[0]; s.value = arguments[1]; s.dispatchEvent(new Event('input'))", search, written
    )
    matches = sum(written.lower() in searchable(r) for r in records)
    assert "3" in [r.get_attribute("data-i") for r in shown(driver, matches)]
    search.clear()
    search.send_keys("no episode has this text")
    assert shown(driver, 0) == [] and "No episode matches" in driver.find_element("id", "spacer").text


def test_summary_shows_steps_stop_reasons_and_turns(driver, page_url, records):
    open_page(driver, page_url)
    points = driver.find_elements("css selector", ".chart svg circle")
    steps = {r["step"] for r in records}
    assert len(points) == 2 * len(steps)  # mean reward and success rate per step
    bars = {b.get_attribute("data-stop"): b.text.split()[-1] for b in driver.find_elements("css selector", ".bar-row")}
    assert bars == {k: str(v) for k, v in Counter(r["stop_reason"] for r in records).items()}
    cards = driver.find_element("css selector", ".cards").text
    assert f"{sum(r['num_turns'] for r in records)} turns" in cards


def test_the_page_makes_no_network_request_and_no_error(driver, page_url):
    open_page(driver, page_url)
    driver.find_element("css selector", "#spacer .row").click()
    requests = [
        json.loads(entry["message"])["message"]["params"]["request"]["url"]
        for entry in driver.get_log("performance")
        if json.loads(entry["message"])["message"]["method"] == "Network.requestWillBeSent"
    ]
    assert requests == [page_url]
    entries = driver.execute_script("return performance.getEntries().map((e) => [e.entryType, e.name])")
    assert [name for kind, name in entries if kind in ("navigation", "resource")] == [page_url]
    assert [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"] == []


def test_ten_thousand_episodes_stay_responsive(driver, records, tmp_path):
    url = write_page(many(records, 10_000), tmp_path / "big.html").as_uri()
    open_page(driver, url)
    load_ms = driver.execute_script("const t = performance.timing; return t.loadEventEnd - t.navigationStart")
    assert count_text(driver) == "10,000 of 10,000 episodes"
    assert len(rows(driver)) < 80  # only the rows on screen (and a margin) exist
    driver.execute_script("const v = document.getElementById('viewport'); v.scrollTop = v.scrollHeight")
    driver.execute_script("return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert "9999" in [r.get_attribute("data-i") for r in rows(driver)]
    search_ms = driver.execute_script(
        "const t = performance.now(); document.getElementById('f-search').value = 'ep-77';"
        "applyFilters(); return performance.now() - t"
    )
    assert count_text(driver) == f"{sum('ep-77' in f'ep-{i}' for i in range(10_000))} of 10,000 episodes"
    open_ms = driver.execute_script("const t = performance.now(); select(9999); return performance.now() - t")
    print(f"10k episodes: load {load_ms} ms, first search {search_ms:.0f} ms, open an episode {open_ms:.0f} ms")
    assert load_ms < 5_000 and search_ms < 2_000 and open_ms < 500
