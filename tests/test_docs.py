"""The docs cannot rot: every ``trl_env.…`` name they write exists, and every relative link points to a file.

Names are collected from the package's source text (docstrings, comments and messages: anything a reader sees)
and from ``README.md`` and ``docs/*.md``. A name resolves when its longest importable module prefix imports and
``getattr`` finds the rest. Links are Markdown links and images; an anchor (``page.md#section``) must match a
heading of the Markdown file it points to.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "trl_env"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# ``trl_env`` then dotted identifiers; not preceded by a letter, a digit, ``_`` or ``.`` (so ``my_trl_env.x`` and
# ``a.trl_env.x`` are not names), and a sentence's final dot is not part of the name.
NAME = re.compile(r"(?<![\w.])trl_env(?:\.[A-Za-z_]\w*)+")
# What follows a name that makes its last part a pattern, not a name: ``trl_env.adapters.*``,
# ``trl_env.chat.tool_*``, ``trl_env.{module}``, ``trl_env.cli.<command>``.
PATTERN_AFTER = re.compile(r"[*{<]")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def dotted_names(text: str) -> set[str]:
    """Every ``trl_env.…`` name written in ``text``; a wildcard's fixed part stands for the wildcard.

    Args:
        text: Markdown or Python source.

    Returns:
        The dotted names, e.g. ``{"trl_env.core.Env", "trl_env.adapters"}`` for
        ``"see `trl_env.core.Env`, and trl_env.adapters.* (all)."``.
    """
    names = set()
    for match in NAME.finditer(text):
        name = match.group(0)
        if PATTERN_AFTER.match(text, match.end()):  # ``tool_*``: the last part is a pattern, keep what is fixed
            name = name.rsplit(".", 1)[0]
        if name != "trl_env":
            names.add(name)
    return names


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute reached from its longest importable module prefix.

    Args:
        name: A dotted name such as ``trl_env.engine.config.RolloutConfig.max_turns``.

    Returns:
        True when the module imports and every later part is found with ``getattr``.
    """
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name is not None and not ".".join(parts[:cut]).startswith(error.name):
                raise  # the module exists but one of its own imports is missing: a real failure, not a stale name
            continue
        for attribute in parts[cut:]:
            if attribute in getattr(value, "__dataclass_fields__", {}):
                value = value.__dataclass_fields__[attribute]  # a field without a default is no class attribute
                continue
            try:
                value = getattr(value, attribute)
            except AttributeError:
                return False
        return True
    return False


def written_names() -> dict[str, list[str]]:
    """Each dotted name in the package's source and the docs, with the files that write it."""
    where: dict[str, list[str]] = {}
    for path in [*sorted(SRC.rglob("*.py")), *DOCS]:
        for name in dotted_names(path.read_text()):
            where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return where


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*?|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (outside code blocks), with GitHub's ``-1``, ``-2`` for repeats."""
    seen: dict[str, int] = {}
    found = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (heading := re.match(r"#{1,6}\s+(.*)", line)):
            anchor = github_anchor(heading.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file (not web addresses, not inside code blocks or spans)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [link for link in LINK.findall(text) if not re.match(r"[a-z][a-z+.-]*:", link)]


def test_the_name_extraction_ignores_punctuation_code_spans_and_wildcards():
    text = (
        "Use `trl_env.core.Env`. See trl_env.engine.config.RolloutConfig, trl_env.adapters.* and "
        "trl_env.chat.tool_* and ``trl_env.cli.<command>``; my_trl_env.x is not one (trl_env.episode)."
    )
    assert dotted_names(text) == {
        "trl_env.core.Env",
        "trl_env.engine.config.RolloutConfig",
        "trl_env.adapters",
        "trl_env.chat",
        "trl_env.cli",
        "trl_env.episode",
    }


def test_the_resolver_tells_real_names_from_stale_ones():
    assert resolves("trl_env.core.Env")
    assert resolves("trl_env.evaluate")  # a lazy top-level name
    assert resolves("trl_env.engine.config.RolloutConfig.max_turns")
    assert not resolves("trl_env.additivity")
    assert not resolves("trl_env.core.NoSuchProtocol")


def test_the_anchor_of_a_heading_is_githubs():
    assert github_anchor("Seeing what the model saw: `trl-env view`") == "seeing-what-the-model-saw-trl-env-view"
    assert github_anchor("1. `TransformersGenerator`: sampling") == "1-transformersgenerator-sampling"


def test_every_trl_env_name_in_the_docs_and_docstrings_resolves():
    stale = {name: files for name, files in sorted(written_names().items()) if not resolves(name)}
    assert not stale, "names that no longer exist (fix the text, or the name moved):\n" + "\n".join(
        f"  {name}  in {', '.join(files)}" for name, files in stale.items()
    )


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file, or whose heading in a Markdown file, does not exist."""
    broken = []
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        file = (page.parent / target).resolve() if target else page
        if not file.exists():
            broken.append(f"{link} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{link} (no heading #{anchor} in {file.name})")
    return broken


def test_a_missing_file_or_heading_is_a_broken_link(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` section\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md) [ok](other.md#a-code-section) ![ok](other.md) [web](https://x.org/y.md) `[no](code.md)`\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) [here](#page)\n\n# Page\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nowhere (no heading #nowhere in other.md)"]


@pytest.mark.parametrize("page", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file(page):
    broken = broken_links(page)
    assert not broken, f"broken links in {page.relative_to(ROOT)}: " + ", ".join(broken)


def test_the_architecture_tree_names_every_module_and_only_real_ones():
    text = (ROOT / "docs" / "architecture.md").read_text()
    tree = re.search(r"```\nsrc/trl_env/\n(.*?)```", text, re.S).group(1)
    files = {path.name for path in SRC.rglob("*.py") if path.name not in ("__init__.py", "__main__.py")}
    named = set(re.findall(r"\b(\w+\.py)\b", tree))
    assert not files - named, f"docs/architecture.md's tree does not name {sorted(files - named)}"
    assert not named - files, f"docs/architecture.md's tree names files that do not exist: {sorted(named - files)}"
    packages = {path.name for path in SRC.iterdir() if (path / "__init__.py").exists()}
    listed = set(re.findall(r"^  (\w+)/", tree, re.M))
    assert packages == listed, f"subpackages {sorted(packages)}, the tree lists {sorted(listed)}"


def test_the_readme_module_table_names_every_subpackage_and_top_level_module():
    text = (ROOT / "README.md").read_text()
    table = re.search(r"\| module \| concept \|\n\|---\|---\|\n((?:\|.*\n?)+)", text).group(1)
    named = set(re.findall(r"`(\w+(?:\.py|/))`", "\n".join(row.split(" | ")[0] for row in table.splitlines())))
    real = {f"{path.name}/" for path in SRC.iterdir() if (path / "__init__.py").exists()}
    real |= {path.name for path in SRC.glob("*.py") if path.name != "__init__.py"}
    assert named == real, f"README's module table names {sorted(named)}; the package has {sorted(real)}"


# Project folders a path written in the docs may start from; other paths (``vllm/v1/...``) are other projects'.
PROJECT_DIRS = ("src", "tests", "benchmarks", "examples", "experiments", "scripts", "demo", "configs", "docs")
PATH_SPAN = re.compile(r"`([\w./-]+\.(?:py|md|yaml|sh|png|json|toml))(?:::(\w+)[^`]*)?`")
TEST_SPAN = re.compile(r"`(test_\w+)(?:\[[^`]*\])?`")


def code_spans_outside_blocks(text: str) -> str:
    """``text`` without its fenced code blocks (commands there may name files the reader creates)."""
    return re.sub(r"```.*?```", "", text, flags=re.S)


def missing_paths_and_tests(page: Path) -> list[str]:
    """Files and test functions a page names in code spans that do not exist.

    A path counts when it starts at a project folder, is a test file (``engine/test_env_pool.py``, under
    ``tests/``) or starts at a ``trl_env`` subpackage (``checks/tool_turns.py``). ``FILE::test_name`` must define
    ``test_name``; a bare ``test_name`` must be defined in some test file.

    Args:
        page: a Markdown file.

    Returns:
        One line per missing file or test.
    """
    text = code_spans_outside_blocks(page.read_text())
    packages = {path.name for path in SRC.iterdir() if (path / "__init__.py").exists()}
    tests = ROOT / "tests"
    missing = []
    for path, test in PATH_SPAN.findall(text):
        first = path.split("/")[0]
        if first in PROJECT_DIRS:
            file = ROOT / path
        elif Path(path).name.startswith("test_") and path.endswith(".py"):
            file = tests / path  # ``engine/test_env_pool.py``: the tests mirror the package's folders
        elif first in packages or first == "trl_env":
            file = SRC / path.removeprefix("trl_env/")
        else:
            continue
        if not file.exists():
            missing.append(f"{path} (no such file)")
        elif test and not re.search(rf"^(?:async )?def {test}\(", file.read_text(), re.M):
            missing.append(f"{path}::{test} (no such test)")
    defined = "\n".join(path.read_text() for path in tests.rglob("test_*.py"))
    for test in TEST_SPAN.findall(text):
        if not re.search(rf"^(?:async )?def {test}\(", defined, re.M):
            missing.append(f"{test} (no such test)")
    return missing


def test_a_missing_file_or_test_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "`tests/test_docs.py::test_a_missing_file_or_test_is_reported` `docs/design.md` `checks/tool_turns.py`\n"
        "`vllm/v1/sample.py` `test_docs.py::test_the_anchor_of_a_heading_is_githubs[x]`\n"
        "`tests/no_such.py` `test_docs.py::test_nothing_here` `test_not_defined_anywhere` `chat/gone.py`\n"
        "```\npython gone_too.py\n```\n"
    )
    assert missing_paths_and_tests(page) == [
        "tests/no_such.py (no such file)",
        "test_docs.py::test_nothing_here (no such test)",
        "chat/gone.py (no such file)",
        "test_not_defined_anywhere (no such test)",
    ]


@pytest.mark.parametrize("page", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_file_and_test_a_page_names_exists(page):
    missing = missing_paths_and_tests(page)
    assert not missing, f"{page.relative_to(ROOT)} names what does not exist: " + ", ".join(missing)
