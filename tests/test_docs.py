"""The README is one screen with docs/ behind it: it fits, its links and the docs' links resolve, the
configuration table is the schema's, and the commands and study files the docs show run as written."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cycleio.config.docs import END, START, schema_markdown
from cycleio.config.settings import load_schema

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)

# Commands the docs show that this test does not run, and why.
NOT_RUN = {
    "make test": "the whole suite, about 11 minutes: it is what runs this test",
}
# Placeholders for the reader's own files, replaced by the repository's to run the command.
PLACEHOLDERS = {"profiles/mysite": "profiles/slurm", "config/studies/mine.yaml": "config/studies/smoke.yaml"}
# Study-file examples that only make sense over another study: the config laid under them.
YAML_BASES = {"faults:": "cycles: {start: '2026123112', end: '2027010106'}\n"}


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def blocks(language: str) -> list[tuple[Path, str]]:
    return [(page, body) for page in PAGES for lang, body in FENCE.findall(page.read_text()) if lang == language]


def commands() -> list[tuple[str, str]]:
    """(page, command line) of every make, snakemake or cycleio line in the docs' bash blocks."""
    found = []
    for page, body in blocks("bash"):
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words.pop(0)
            if words and (words[0] in ("make", "snakemake", "cycleio") or words[1:3] == ["-m", "cycleio"]):
                found.append((str(page.relative_to(REPO)), line.split(" #")[0].strip()))
    return found


def test_the_readme_fits_one_screen():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_starts_with_the_two_commands():
    first = FENCE.search(README.read_text())
    assert first and README.read_text()[:first.end()].count("\n") < 30
    assert [line.split()[:2] for line in first.group(2).splitlines()] == [["make", "study"], ["make", "test"]]


def test_every_page_of_docs_is_linked_from_the_readme():
    linked = {target.split("#")[0] for target in LINK.findall(prose(README.read_text()))}
    assert not {f"docs/{page.name}" for page in PAGES[1:]} - linked


def test_every_relative_link_resolves_to_a_file_and_heading():
    broken = []
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_configuration_table_is_generated_from_the_schema(tmp_path):
    page = REPO / "docs" / "configuration.md"
    text = page.read_text()
    assert text.count(START) == 1 and text.count(END) == 1
    assert f"{START}\n{schema_markdown(load_schema())}{END}" in text, \
        "docs/configuration.md's table is stale: python -m cycleio config-docs --update docs/configuration.md"
    copy = tmp_path / "configuration.md"
    shutil.copy(page, copy)
    subprocess.run([sys.executable, "-m", "cycleio", "config-docs", "--update", str(copy)], check=True, cwd=REPO)
    assert copy.read_text() == text
    assert not any(START in p.read_text() for p in PAGES if p != page)


def test_the_docs_show_commands_of_every_kind():
    lines = [line for _, line in commands()]
    assert any(line.startswith("make study ARGS=") for line in lines)
    assert any("-m cycleio" in line for line in lines)
    assert set(NOT_RUN) <= set(lines), "a NOT_RUN entry no longer in the docs"


def run(words: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(words, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def checks(line: str) -> list[list[str]]:
    """The quick runs that check a command line as written: a Snakemake dry run for make study and
    snakemake (plus make's own dry run, which takes ARGS on to make report and the study-name lookup),
    the command itself for cycleio."""
    for placeholder, real in PLACEHOLDERS.items():
        line = line.replace(placeholder, real)
    words = shlex.split(line, comments=True)
    while re.fullmatch(r"[A-Z_]+=.*", words[0]):
        words.pop(0)
    if words[:2] == ["make", "study"]:
        if not any(w.startswith("ARGS=") for w in words):
            words.append("ARGS=")
        dry = [w + " -n" if w.startswith("ARGS=") else w for w in words]
        return [["make", "-s", "--no-print-directory", *dry[1:]], ["make", "-n", "--no-print-directory", *words[1:]]]
    if words[0] == "snakemake":
        return [words + ["-n"]]
    if words[0] == "cycleio":
        return [[sys.executable, "-m", *words]]
    if words[1:3] == ["-m", "cycleio"]:
        return [[sys.executable, *words[1:]]]
    raise AssertionError(f"no quick check for {line!r}: add one, or list it in NOT_RUN with the reason")


@pytest.mark.e2e  # Snakemake dry runs: in `make test`, not in `make test-fast`
@pytest.mark.parametrize("page,line", [(page, line) for page, line in commands() if line not in NOT_RUN])
def test_every_command_the_docs_show_runs_as_written(page, line):
    """The commands NOT_RUN names (each with its reason) are not parametrized: in CI nothing skips."""
    for words in checks(line):
        result = run(words)
        assert result.returncode == 0, f"{page}: {line}\nchecked as {shlex.join(words)}: exit {result.returncode}\n" \
                                       f"{result.stdout[-1500:]}\n{result.stderr[-1500:]}"


def inline_commands() -> list[tuple[str, str]]:
    """(page, code span) of every make, snakemake or cycleio command the docs' prose names inline."""
    found = set()
    for page in PAGES:
        for span in re.findall(r"`([^`\n]+)`", FENCE.sub("", page.read_text())):
            words = span.split()
            if words[:3] == ["python", "-m", "cycleio"]:
                words = words[2:]
            if words and words[0] in ("make", "snakemake", "cycleio"):
                found.add((str(page.relative_to(REPO)), " ".join(words)))
    return sorted(found)


def inline_check(span: str) -> tuple[list[str], list[str]]:
    """How a command named inline is checked (it often names a command without its arguments, or with
    placeholders like `results/<A>`): make's dry run of its target, else the command's --help, which must
    offer every option the span shows. Returns the argv and the options to find in its output."""
    words = [w for w in shlex.split(span.replace("[", " ").replace("]", " ")) if w != "..."]
    if words[0] == "make":
        return ["make", "-n", "--no-print-directory", *words[1:]], []
    options = [w.split("=")[0] for w in words if w.startswith("--") and w != "--help"]
    if words[0] == "snakemake":
        return ["snakemake", "--help"], options
    chain = [w for w in words[1:] if re.fullmatch(r"[a-z][a-z-]*", w)][:2]  # a command and a subcommand
    return [sys.executable, "-m", "cycleio", *chain, "--help"], options


@pytest.mark.e2e  # a Python or make start-up each: in `make test`, not in `make test-fast`
@pytest.mark.parametrize("page,span", inline_commands())
def test_every_command_named_inline_exists_with_its_options(page, span):
    argv, options = inline_check(span)
    result = run(argv)
    if result.returncode != 0 and argv[-1] == "--help" and len(argv) > 5:  # the second word was an argument
        argv = [*argv[:-2], "--help"]
        result = run(argv)
    assert result.returncode == 0, f"{page}: `{span}` checked as {shlex.join(argv)}: exit {result.returncode}\n" \
                                   f"{result.stderr[-1500:]}"
    missing = [o for o in options if o not in result.stdout]
    assert not missing, f"{page}: `{span}`: {shlex.join(argv)} offers no {', '.join(missing)}"


@pytest.mark.parametrize("page,body", blocks("yaml"), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_every_study_file_the_docs_show_is_a_valid_config(page, body, tmp_path):
    files = ["config/config.yaml"]
    for start, base in YAML_BASES.items():
        if body.startswith(start):
            (tmp_path / "base.yaml").write_text(base)
            files.append(str(tmp_path / "base.yaml"))
    (tmp_path / "example.yaml").write_text(body)
    result = run([sys.executable, "-m", "cycleio", "check-config", *files, str(tmp_path / "example.yaml")])
    assert result.returncode == 0, f"{page.relative_to(REPO)}:\n{body}\n{result.stderr[-1500:]}"
