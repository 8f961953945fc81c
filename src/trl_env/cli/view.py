"""``trl-env view FILE...``: one self-contained HTML page of evaluation or training transcripts.

The page needs no network and no server: open it from disk. It shows each episode's tokens
coloured by mask (model / env / end-of-turn tokens the engine added), the sampled tokens'
logprobs, turn rewards, stop reasons and errors, a summary over training steps, filters and search.

Example:
    >>> import json
    >>> _ = (tmp_path / "t.jsonl").write_text(json.dumps({"seed": "s", "reward": 1.0, "stop_reason": "done",
    ...     "error": None, "num_turns": 0, "turns": [], "text": "hi"}) + "\\n")
    >>> main(["view", str(tmp_path / "t.jsonl"), "-o", str(tmp_path / "page.html")])
    wrote 1 episodes to .../page.html
    0
"""

from __future__ import annotations

import argparse

from trl_env.cli.arguments import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``view`` subcommand."""
    parser = subparsers.add_parser(
        "view",
        help="write an HTML page to inspect transcripts (eval or training)",
        description="Write an HTML page to inspect transcripts (eval or training).",
    )
    parser.add_argument("files", nargs="+", help="JSONL transcript files (trl-env eval --out, training transcripts)")
    parser.add_argument("-o", "--out", default="transcripts.html", help="the page to write (default transcripts.html)")
    parser.add_argument("--title", default="trl-env transcripts", help="the page's title")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the records and write the page."""
    from trl_env.viewer import read_records, write_page

    try:
        records = read_records(args.files)
    except (OSError, ValueError) as error:
        raise UsageError(str(error)) from None
    path = write_page(records, args.out, title=args.title)
    print(f"wrote {len(records)} episodes to {path}")
    return 0
