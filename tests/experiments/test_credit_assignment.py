"""The credit-assignment comparison runs the demo per (method, seed), resumes, and reports a table and a plot."""

from __future__ import annotations

import doctest
import json

from tests.experiments.experiment_module import load_experiment


def _load():
    return load_experiment("credit_assignment")


def test_two_methods_run_resume_and_report(tiny_model_dir, tmp_path, capsys, monkeypatch):
    experiment = _load()
    paths = ["--runs", str(tmp_path / "runs"), "--result", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]
    paths += ["--task", "doors"]  # the early-decision task, through the demo's --task
    demo = f"--smoke --model {tiny_model_dir} --greedy-eval"
    assert experiment.main(["run", "--methods", "episode", "anchor", "--seeds", "0", "--demo-args", demo, *paths]) == 0
    results = json.loads((tmp_path / "r.json").read_text())
    assert sorted(results) == ["anchor", "episode"]
    for method, (row,) in results.items():
        summary = json.loads((tmp_path / "runs" / "doors" / f"{method}-seed0" / "summary.json").read_text())
        assert summary["advantage"] == method and summary["before"] is None and summary["task"] == "doors"
        first_prompt = json.loads(
            (tmp_path / "runs" / "doors" / f"{method}-seed0" / "transcripts_after.jsonl").open().readline()
        )
        assert "doors" in json.dumps(first_prompt)
        assert row["heldout_success"] == summary["after"]["success_rate"] and row["steps"] == 2
        assert row["heldout_metrics"]["right_door"] == summary["after"]["metric_means"]["right_door"]
        assert row["heldout_greedy_success"] == summary["after_greedy"]["success_rate"]
        assert len(row["curve_minutes"]) == 2 and row["curve_minutes"][0] < row["curve_minutes"][1]
        # no --zero-variance, so no groups/* metrics; the held-out first answers were read from the transcripts
        assert row["groups"] == {} and 0 < row["top_first_answer_share"] <= 1
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    table = capsys.readouterr().out
    assert "| episode | 1 |" in table and "| anchor | 1 |" in table and "right door, per seed" in table
    assert "| greedy, mean ± sd | per seed |" in table
    # finished runs are not run again: a second call only reports
    stamp = (tmp_path / "runs" / "doors" / "anchor-seed0" / "summary.json").stat().st_mtime_ns
    assert experiment.main(["run", "--methods", "anchor", "--seeds", "0", "--demo-args", demo, *paths]) == 0
    assert (tmp_path / "runs" / "doors" / "anchor-seed0" / "summary.json").stat().st_mtime_ns == stamp
    # an earlier result's rows stay for runs whose folders are gone; a run folder wins over its earlier row
    earlier = {"turn": [dict(results["anchor"][0], seed=7)], "anchor": [dict(results["anchor"][0], steps=99)]}
    (tmp_path / "earlier.json").write_text(json.dumps(earlier))
    assert experiment.main(["report", *paths, "--earlier", str(tmp_path / "earlier.json")]) == 0
    merged = json.loads((tmp_path / "r.json").read_text())
    assert sorted(merged) == ["anchor", "episode", "turn"] and merged["turn"][0]["seed"] == 7
    assert [row["steps"] for row in merged["anchor"]] == [2]
    # --methods narrows the plot only: the JSON keeps every run
    shown, draw = [], experiment.plot
    monkeypatch.setattr(experiment, "plot", lambda runs, *rest: shown.append(sorted(runs)) or draw(runs, *rest))
    assert experiment.main(["report", *paths, "--methods", "anchor"]) == 0
    assert shown == [["anchor"]] and sorted(json.loads((tmp_path / "r.json").read_text())) == ["anchor", "episode"]


def test_the_docstring_examples_run():
    assert doctest.testmod(_load()).failed == 0
