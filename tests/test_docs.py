"""The README is one screen with docs/ behind it: it fits, its links and the docs' links resolve, the
configuration table is the schema's and the command-line reference the parser's, the commands and study files
the docs show run as written, every config key and module the docs name exists (the columns:
test_outputs_doc), and the docs state what holds, without dates."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cycleio_in_process

from cycleio.cli import USER_COMMANDS, build_parser
from cycleio.cli.clidocs import END as CLI_END, START as CLI_START, cli_markdown
from cycleio.config.docs import END, START, schema_markdown
from cycleio.config.schema import load_schema, study_schema

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)

# Commands the docs show that this test does not run, and why.
NOT_RUN = {
    "make test": "the whole suite, 10 to 13 minutes: it is what runs this test",
    'make bench BENCH_ARGS="--only study"': "two default studies from fresh results, about 10 minutes",
}
# The cycleio commands run for real where the docs show them (each takes seconds); every other cycleio command
# the docs show (it would replay a log, compare studies not made, run a benchmark) is parsed by the command's own
# parser, which refuses a missing required option or an unknown one, and its --help is run.
RUN_FOR_REAL = {"--help", "check-config", "inventory", "study-name", "config-docs", "cli-docs"}
# Placeholders for the reader's own files, replaced by the repository's to run the command.
PLACEHOLDERS = {"profiles/mysite": "profiles/slurm", "config/studies/mine.yaml": "config/studies/smoke.yaml",
                # a dry run reads the library's path only (a readable file); the log is read as the study would
                "/path/to/lib/libdarshan.so": "tests/data/darshan/README.md",
                "/path/to/my_forecast.darshan": "tests/data/darshan/tinyio-3.5.0.darshan"}
# Study-file examples that only make sense over another study: the config laid under them.
YAML_BASES = {"faults:": "cycles: {start: '2026123112', end: '2027010106'}\n"}


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped (a code span's text kept as it is, underscores too), lower case,
    punctuation removed, spaces to hyphens."""
    parts = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).split("`")
    text = "".join(part if inside else re.sub(r"[*_]", "", part) for inside, part in
                   zip([i % 2 == 1 for i in range(len(parts))], parts)).strip().lower()
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
            if words and words[0] == ".venv/bin/cycleio":
                words[0] = "cycleio"
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
    assert not {str(page.relative_to(REPO)) for page in PAGES[1:]} - linked


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


def test_the_command_line_reference_is_generated_from_the_parser(tmp_path):
    page = REPO / "docs" / "cli.md"
    text = page.read_text()
    assert text.count(CLI_START) == 1 and text.count(CLI_END) == 1
    assert f"{CLI_START}\n{cli_markdown(build_parser(), USER_COMMANDS)}{CLI_END}" in text, \
        "docs/cli.md's reference is stale: python -m cycleio cli-docs --update docs/cli.md"
    copy = tmp_path / "cli.md"
    shutil.copy(page, copy)
    subprocess.run([sys.executable, "-m", "cycleio", "cli-docs", "--update", str(copy)], check=True, cwd=REPO)
    assert copy.read_text() == text
    headings = set(re.findall(r"^## cycleio (\S+)$", text, re.M))
    assert headings >= set(build_parser()._subparsers._group_actions[0].choices), "a command missing from docs/cli.md"


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
    if words[0] == ".venv/bin/cycleio":
        words[0] = "cycleio"
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


def cycleio_words(line: str) -> list[str] | None:
    """The arguments of a cycleio command line (after `cycleio`, `.venv/bin/cycleio` or `python -m cycleio`)."""
    words = shlex.split(line, comments=True)
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        words.pop(0)
    if words and words[0] in ("cycleio", ".venv/bin/cycleio"):
        return words[1:]
    if words[1:3] == ["-m", "cycleio"]:
        return words[3:]
    return None


def cycleio_lines() -> list[tuple[str, str]]:
    """(pages, line) of every cycleio line of the docs' bash blocks, each command (its arguments) once with the pages
    that show it."""
    lines: dict[tuple[str, ...], tuple[str, list[str]]] = {}
    for page, line in commands():
        argv = cycleio_words(line)
        if argv is not None:
            lines.setdefault(tuple(argv), (line, []))[1].append(page)
    return [(", ".join(pages), line) for line, pages in lines.values()]


@pytest.mark.parametrize("page,line", cycleio_lines())
def test_every_cycleio_command_the_docs_show_is_valid_and_runs(page, line):
    """In `make test-fast`: each cycleio command parses as written (a required option left out, an option the
    command does not have, a global option put after the command all fail here), and the quick ones run."""
    argv = cycleio_words(line)
    parser = build_parser()
    if "--help" not in argv:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                parser.parse_args(argv)
            except SystemExit:
                raise AssertionError(f"{page}: {line}\n{err.getvalue()}") from None
    chain = [w for w in argv if not w.startswith("-")][:2]
    if (argv and argv[0] in RUN_FOR_REAL) or argv == ["--help"] or "--help" in argv:
        code, output = in_process(argv)
        assert code == 0, f"{page}: {line}: exit {code}\n{output[-1500:]}"
    else:
        code, output = help_text([*chain[:1], "--help"] if chain else ["--help"])
        assert code == 0, output


def run_as_written() -> list[tuple[str, str]]:
    """(pages, line) of every make and snakemake line of the docs' bash blocks that is run, each line once with the
    pages that show it (a dry run takes seconds)."""
    pages: dict[str, list[str]] = {}
    for page, line in commands():
        if line not in NOT_RUN and cycleio_words(line) is None:
            pages.setdefault(line, []).append(page)
    return [(", ".join(shown), line) for line, shown in pages.items()]


@pytest.mark.e2e  # Snakemake dry runs: in `make test`, not in `make test-fast`
@pytest.mark.parametrize("page,line", run_as_written())
def test_every_command_the_docs_show_runs_as_written(page, line):
    """The commands NOT_RUN names (each with its reason) are not parametrized: in CI nothing skips."""
    for words in checks(line):
        result = run(words)
        assert result.returncode == 0, f"{page}: {line}\nchecked as {shlex.join(words)}: exit {result.returncode}\n" \
                                       f"{result.stdout[-1500:]}\n{result.stderr[-1500:]}"


def inline_commands() -> list[tuple[str, str]]:
    """(page, code span) of every make, snakemake or cycleio command the docs' prose names inline."""
    found: dict[str, str] = {}
    # a make line a bash block shows is run as written, make's own dry run included (test_every_command_the_docs_...)
    run = {" ".join(line.split()) for _, line in run_as_written() if line.startswith("make ")}
    for page in PAGES:
        for span in re.findall(r"`([^`\n]+)`", FENCE.sub("", page.read_text())):
            words = span.split()
            if words[:3] == ["python", "-m", "cycleio"]:
                words = words[2:]
            if words and words[0] in ("make", "snakemake", "cycleio") and " ".join(words) not in run:
                found.setdefault(" ".join(words), str(page.relative_to(REPO)))  # each span once
    # make and snakemake start a process each (make study also a Python for the study's name): in `make test`
    return [pytest.param(page, span, marks=[pytest.mark.e2e] if span.split()[0] in ("make", "snakemake") else [])
            for span, page in sorted(found.items())]


def in_process(argv: list[str]) -> tuple[int, str]:
    """Exit code and output of ``cycleio ARGV`` run in this process from the repository, as the docs run it there
    (a second Python would spend its seconds importing what this one has)."""
    with contextlib.chdir(REPO):
        return help_text(argv)


def help_text(argv: list[str]) -> tuple[int, str]:
    """Exit code and output of ``cycleio ARGV`` in this process."""
    done = cycleio_in_process(argv)
    return done.returncode, done.stdout + done.stderr


def inline_check(span: str) -> tuple[int, str, str]:
    """A command named inline (often without its arguments, or with placeholders like `results/<A>`) checked
    as far as it can be: make's dry run of its target; else the command's --help, which must offer every
    option the span shows. Returns the exit code, the output and what was run."""
    words = [w for w in shlex.split(span.replace("[", " ").replace("]", " ")) if w != "..."]
    options = [w.split("=")[0] for w in words if w.startswith("--") and w != "--help"]
    if words[0] == "make":
        argv = ["make", "-n", "--no-print-directory", *words[1:]]
        result = run(argv)
        return result.returncode, result.stdout + result.stderr, shlex.join(argv)
    if words[0] == "snakemake":
        result = run(["snakemake", "--help"])
        output = result.stdout
    else:
        chain = [w for w in words[1:] if re.fullmatch(r"[a-z][a-z-]*", w)][:2]  # a command and a subcommand
        code, output = help_text([*chain, "--help"])
        if code != 0 and len(chain) == 2:  # the second word was an argument
            chain = chain[:1]
            code, output = help_text([*chain, "--help"])
        if code != 0:
            return code, output, f"cycleio {' '.join(chain)} --help"
    missing = [o for o in options if o not in output]
    return (1 if missing else 0), f"offers no {', '.join(missing)}" if missing else output, span


@pytest.mark.parametrize("page,span", inline_commands())
def test_every_command_named_inline_exists_with_its_options(page, span):
    code, output, checked = inline_check(span)
    assert code == 0, f"{page}: `{span}` checked as {checked}: exit {code}\n{output[-1500:]}"


@pytest.mark.parametrize("page,body", blocks("yaml"), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_every_study_file_the_docs_show_is_a_valid_config(page, body, tmp_path):
    files = ["config/config.yaml"]
    for start, base in YAML_BASES.items():
        if body.startswith(start):
            (tmp_path / "base.yaml").write_text(base)
            files.append(str(tmp_path / "base.yaml"))
    (tmp_path / "example.yaml").write_text(body)
    code, output = in_process(["check-config", *files, str(tmp_path / "example.yaml")])
    assert code == 0, f"{page.relative_to(REPO)}:\n{body}\n{output[-1500:]}"


# The docs state what holds: a date, or "this session", belongs to bench/RESULTS.md, bench/FINDINGS.md or git.
DIARY = re.compile(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]|(this|last|that) session", re.I)


def test_the_docs_carry_no_dates():
    found = [f"{page.relative_to(REPO)}:{n}: {line.strip()[:100]}" for page in PAGES
             for n, line in enumerate(page.read_text().splitlines(), 1) if DIARY.search(line)]
    assert not found, "dates belong in bench/RESULTS.md or bench/FINDINGS.md:\n" + "\n".join(found)


FILE_SUFFIXES = {"yaml", "md", "csv", "py", "png", "svg", "smk", "html", "json", "jsonl", "txt", "nc", "tar", "sh",
                 "toml", "cff", "log", "parquet", "idx", "darshan"}
CONFIG_KEY = re.compile(r"[a-z_]+(?:\.(?:[a-z_][a-z0-9_]*|<name>))+")


def schema_has(schema: dict, parts: list[str]) -> bool:
    """Whether a dotted key (parts) names a key of the schema: properties by name, a named entry of a map
    (tiers.shm, darshan.jobs.<name>) by any name."""
    node = schema
    for part in parts:
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return False
    return True


def config_keys() -> list[tuple[str, str]]:
    """(page, key) of every code span in the docs' prose that starts with a top-level config key and a dot."""
    top = set(study_schema()["properties"])
    found: dict[str, str] = {}
    for page in PAGES:
        for span in re.findall(r"`([^`\n]+)`", FENCE.sub("", page.read_text())):
            span = span.split(":")[0].split("=")[0].strip()
            if CONFIG_KEY.fullmatch(span) and span.split(".")[0] in top and span.rsplit(".", 1)[1] not in FILE_SUFFIXES:
                found.setdefault(span, str(page.relative_to(REPO)))
    return sorted((page, key) for key, page in found.items())


def test_the_docs_name_config_keys():
    keys = [key for _, key in config_keys()]
    assert "staging.reads_from_storage" in keys and "benchmarks.replay.min_bytes" in keys


@pytest.mark.parametrize("page,key", config_keys())
def test_every_config_key_the_docs_name_exists(page, key):
    assert schema_has(study_schema(), key.split(".")), f"{page}: `{key}` is no key of config/schemas/config.schema.yaml"


PACKAGE = REPO / "scripts" / "cycleio"


def package_map() -> set[str]:
    """The modules docs/design.md's package map names: in the fenced block that starts with scripts/cycleio/, a
    line starting with a subpackage's path (`report/`, `surrogates/forecast/`) or `(top level)` sets where the
    modules named after it (`name.py`) live, up to the next such line."""
    text = (REPO / "docs" / "design.md").read_text()
    body = next(b for _, b in FENCE.findall(text) if b.startswith("scripts/cycleio/\n"))
    named, where = set(), None
    for line in body.splitlines()[1:]:
        head = re.match(r"  ((?:[a-z_]+/)+|\(top level\))", line)
        if head:
            where = "" if head.group(1) == "(top level)" else head.group(1)
            line = line[head.end():]
        for module in re.findall(r"(?<![\w/.])([a-z_][a-z0-9_]*\.py)\b", line):
            named.add(f"{where}{module}")
    return named


def test_the_package_map_names_every_module_and_only_modules():
    every = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    on_disk = {m for m in every if not m.endswith("/__init__.py")}  # a subpackage's __init__ may go unnamed
    named = package_map()
    assert not named - every, f"docs/design.md names modules that do not exist: {sorted(named - on_disk)}"
    assert not on_disk - named, f"docs/design.md's package map misses: {sorted(on_disk - named)}"


def test_the_layers_design_md_names_are_the_contract():
    import tomllib

    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contract if c["type"] == "layers")
    subpackages = [layer for layer in layers if " " not in layer and (PACKAGE / layer).is_dir()]
    text = (REPO / "docs" / "design.md").read_text()
    listed = re.search(r"Its layers, highest first:\s*(.*?), then the top-level", text, re.S).group(1)
    assert re.findall(r"`(\w+)`", listed) == subpackages


def test_the_install_page_lists_what_the_bootstrap_installs():
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    packages = re.search(r"SYSTEM_PACKAGES=\(([^)]*)\)", bootstrap).group(1).split()
    install = next(line for page, body in blocks("bash") if page.name == "install.md"
                   for line in body.splitlines() if "apt-get install" in line)
    assert set(packages) <= set(install.split()), f"docs/install.md's apt line misses {set(packages) - set(install.split())}"


def dotted_names() -> list[tuple[str, str]]:
    """(page, name) of every `cycleio.module[.name]` the docs' prose names."""
    found: dict[str, str] = {}
    for page in PAGES:
        for name in re.findall(r"`(cycleio(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", FENCE.sub("", page.read_text())):
            found.setdefault(name, str(page.relative_to(REPO)))
    return sorted((page, name) for name, page in found.items())


@pytest.mark.parametrize("page,name", dotted_names())
def test_every_module_and_function_the_docs_name_exists(page, name):
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(target, attribute), f"{page}: `{name}`: {'.'.join(parts[:cut])} has no {attribute}"
            target = getattr(target, attribute)
        return
    raise AssertionError(f"{page}: `{name}` is no module of the package")


def test_the_docs_show_no_console_blocks():
    """A command is shown in a bash block, one line, so the tests above parse and run it; a console block's `$ ...`
    lines would go unchecked."""
    assert not blocks("console"), [str(page.relative_to(REPO)) for page, _ in blocks("console")]


def bench_benchmarks() -> list[tuple[int, str]]:
    """(number, name) of every benchmark bench/run.py runs, read from its BENCHMARKS without running it."""
    import ast

    tree = ast.parse((REPO / "bench" / "run.py").read_text())
    listed = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and any(getattr(target, "id", None) == "BENCHMARKS" for target in node.targets))
    return [(number, name) for number, name, _ in ast.literal_eval(listed)]


def bench_readme():
    """bench/readme.py, the writer of the README's table of make bench's numbers, imported from bench/."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import readme
    finally:
        sys.path.remove(str(REPO / "bench"))
    return readme


def test_the_bench_table_names_every_benchmark_make_bench_runs():
    benchmarks = bench_benchmarks()
    text = (REPO / "docs" / "performance.md").read_text()
    missing = [f"({n}) {name}" for n, name in benchmarks if f"| ({n}) `{name}` |" not in text]
    assert not missing, f"docs/performance.md's bench table misses {missing}"


def test_the_readmes_bench_table_is_the_latest_results(tmp_path):
    """The README shows make bench's latest numbers as bench/results.json holds them (bench/readme.py writes the
    table after a run; a hand edit, or results committed without their table, fails here)."""
    import json

    readme = bench_readme()
    order = [name for _, name in bench_benchmarks()]
    results = json.loads((REPO / "bench" / "results.json").read_text())
    table = readme.table(results, order)
    assert f"{readme.START}\n{table}\n{readme.END}" in README.read_text(), "run make bench, or bench/readme.py"
    # what make bench does to a README: the table between the markers replaced, the rest as it was
    page = tmp_path / "README.md"
    page.write_text(f"# title\n\n{readme.START}\n| old |\n{readme.END}\n\n## next\n")
    readme.update(page, results, order)
    assert page.read_text() == f"# title\n\n{readme.START}\n{table}\n{readme.END}\n\n## next\n"


def test_the_bench_tables_weakest_case_of_a_count_that_must_stay_zero():
    """The soak's rows: two shares at their goal of 1 and a count of temporaries left at its goal of 0 (lower is
    better): each at its goal, none divided by its zero."""
    readme = bench_readme()
    row = {"run": "soak", "repeats": 1, "unit": "ratio"}
    rows = [{**row, "case": "kills survived", "median": 1.0, "min": 1.0, "max": 1.0, "goal": 1.0},
            {**row, "case": "temporaries left", "median": 0, "min": 0, "max": 0, "goal": 0.0, "higher_is_better": False}]
    line = readme.table({"rows": rows}, ["soak"]).splitlines()[-1]
    assert "| 2 of 2 | kills survived: 1.00 (one run), goal >= 1.00 |" in line, line
    rows[1] = {**rows[1], "median": 2, "min": 2, "max": 2}  # two left: the one goal missed is the weakest
    assert "| 1 of 2 | temporaries left: 2.00 (one run), goal <= 0.00 |" in readme.table({"rows": rows}, ["soak"])


def test_the_layout_names_every_rule_file_study_file_and_profile():
    text = (REPO / "docs" / "design.md").read_text()
    layout = next(b for _, b in FENCE.findall(text) if b.startswith("Snakefile "))
    files = [p.name for p in (REPO / "rules").glob("*.smk")]
    files += [p.name for p in (REPO / "config" / "studies").glob("*.yaml")]
    profiles = [p.name for p in (REPO / "profiles").iterdir() if p.is_dir()]
    missing = [name for name in files + profiles if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", layout)]
    assert not missing, f"docs/design.md's layout does not name {missing}"


def test_the_record_fields_design_md_lists_are_the_records():
    from cycleio.records import RECORD_FIELDS

    text = (REPO / "docs" / "design.md").read_text()
    listed = re.search(r"is a \*\*record\*\* \(JSON lines\): `([^`]*)`", text).group(1)
    assert [f.strip() for f in listed.split(",")] == list(RECORD_FIELDS)


# Words of the project's own history or machine that mean nothing to a reader (the generated reference too: its
# text is the schema's and the parser's).
INTERNAL = re.compile(r"\bseed 0\d\d\b|design card|this VM\b|development machine|\bd[12][0-9] run", re.I)


def test_the_docs_use_no_internal_words():
    found = []
    for page in PAGES:
        found += [f"{page.relative_to(REPO)}:{n}: {line.strip()[:100]}"
                  for n, line in enumerate(page.read_text().splitlines(), 1) if INTERNAL.search(line)]
    assert not found, "\n".join(found)


def test_the_io500_table_states_the_default_patterns():
    """docs/benchmarks.md's IO500 table gives each embedded pattern's shape as config/config.yaml sets it."""
    import yaml

    from cycleio.config.sizes import parse_size

    bench = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["benchmarks"]
    text = (REPO / "docs" / "benchmarks.md").read_text()
    table = text[text.index("## The IO500-like patterns"):]
    rows = {(m.group(1), m.group(2)): m.group(0) for m in re.finditer(r"^\| `(\w+)` \((\w+)\) \|.*$", table, re.M)}

    def mib(size) -> str:
        return f"{parse_size(size, 'benchmarks.patterns') // 2**20} MiB"

    easy, hard = bench["patterns"]["easy"], bench["patterns"]["hard"]
    assert f"{mib(easy['transfer_size'])} transfers, {mib(easy['block_size'])} blocks" in rows[("easy", "bandwidth")]
    hard_transfer = parse_size(hard["transfer_size"], "benchmarks.patterns.hard")
    assert f"{hard_transfer:,}-byte transfers" in rows[("hard", "bandwidth")]
    assert f"{hard['segments']} segments" in rows[("hard", "bandwidth")]
    assert f"`stonewall_s` ({easy['stonewall_s']} s)" in rows[("easy", "bandwidth")]
    assert f"{hard['stonewall_s']} s instead of" in rows[("hard", "bandwidth")]
    # the metadata patterns run in config/studies/benchmarks.yaml, not in the default study
    tiers = yaml.safe_load((REPO / "config" / "studies" / "benchmarks.yaml").read_text())["benchmarks"]
    assert not bench["metadata_patterns"] and tiers["metadata_patterns"] == ["easy", "hard"]
    for name in ("easy", "hard"):
        meta = tiers["metadata"][name]
        counts = ", ".join(map(str, meta["tasks"][:-1])) + f" and {meta['tasks'][-1]}"
        assert f"{meta['files_per_task']} files per task at {counts} tasks (`config/studies/benchmarks.yaml`)" in rows[
            (name, "metadata")]
    assert f"{tiers['metadata']['hard']['file_size']:,} bytes" in rows[("hard", "metadata")]


WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def size_text(value: int) -> str:
    """A size as the docs write it: 256 KiB, 2 MiB, 64 MiB."""
    return f"{value // 2**20} MiB" if value >= 2**20 else f"{value // 2**10} KiB"


def test_the_numbers_the_docs_quote_from_the_code_are_the_codes():
    from cycleio.benchmarks.paired import MAX_READ_LOOPS
    from cycleio.report.answers import NOISE_SIGMAS
    from cycleio.storage import checksums, copyengine, stagingtypes

    quoted = {
        "performance.md": [f"in {size_text(stagingtypes.COPY_CHUNK_BYTES)} chunks",
                           f"each copied {size_text(copyengine.WRITE_BEHIND_BYTES)} range",
                           f"when {size_text(copyengine.IN_FLIGHT_BYTES)} are on their way",
                           f"every {size_text(copyengine.SYNCFS_EVERY_BYTES)} of them",
                           f"A block of {size_text(copyengine.TRAILING_VERIFY_BYTES)} or more",
                           f"more than {WORDS[int(NOISE_SIGMAS)]} standard errors",
                           f"at most {MAX_READ_LOOPS} times"],
        "staging.md": [f"over {size_text(checksums.BLOCK_BYTES)} blocks",
                       f"each copied {size_text(copyengine.WRITE_BEHIND_BYTES)} range",
                       f"every {size_text(copyengine.SYNCFS_EVERY_BYTES)}, and"],
    }
    missing = [f"docs/{page}: {text!r}" for page, texts in quoted.items()
               for text in texts if text not in " ".join((REPO / "docs" / page).read_text().split())]
    assert not missing, "\n".join(missing)


def study_shape(*files: str) -> tuple[int, int, str]:
    """(arms, cycles, resolution) of config/config.yaml with the study files laid over it (top-level keys, and the
    keys of `cycles`)."""
    import yaml

    from cycleio.config.calendar import cycles

    config: dict = {}
    for name in ("config/config.yaml", *files):
        for key, value in yaml.safe_load((REPO / name).read_text()).items():
            config[key] = {**config.get(key, {}), **value} if key == "cycles" else value
    as_list = lambda v: v if isinstance(v, list) else [v]  # noqa: E731
    arms = len(as_list(config["scratch_tiers"])) * len(as_list(config["persistent_tier"]))
    n = len(cycles(config["cycles"]["start"], config["cycles"]["end"], config["cycles"].get("interval_hours", 6)))
    return arms, n, config["resolution"]


@pytest.mark.parametrize("page,files,pattern", [
    ("README.md", (), r"runs the default study \((?P<arms>\w+) arms, (?P<cycles>\w+) cycles at \[(?P<res>C\d+)"),
    ("docs/archive.md", (), r"The default study \((?P<res>C\d+), (?P<cycles>\w+) cycles, (?P<arms>\w+) arms\)"),
    ("docs/tutorial.md", ("config/studies/smoke.yaml",),
     r"(?P<res>C\d+) L\d+, (?P<cycles>\w+) cycles, (?P<arms>\w+) arms"),
    ("docs/archive.md", ("config/studies/archive.yaml",),
     r"archive\.yaml` \((?P<arms>\w+) arms, (?P<res>C\d+), (?P<cycles>\w+) cycles"),
])
def test_the_studies_the_docs_describe_have_that_shape(page, files, pattern):
    """A study's arms, cycles and resolution where the docs state them are those of its config files."""
    numbers = {word: n for n, word in WORDS.items()} | {"five": 5, "six": 6, "seven": 7, "eight": 8}
    stated = re.search(pattern, " ".join((REPO / page).read_text().split()))
    assert stated, f"{page}: no {pattern!r}"
    arms, n, resolution = study_shape(*files)
    said = (numbers.get(stated["arms"]), numbers.get(stated["cycles"]), stated["res"])
    assert said == (arms, n, resolution), \
        f"{page}: {stated.group(0)!r}, but the study has {arms} arms, {n} cycles at {resolution}"


def test_every_figure_the_rules_write_is_in_outputs_md_and_read_in_the_tutorial():
    rules = "".join(p.read_text() for p in (REPO / "rules").glob("*.smk"))
    made = set(re.findall(r'out\(\s*"figures",\s*"(\w+)\.png"', rules))
    outputs = (REPO / "docs" / "outputs.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)` \|", outputs[outputs.index("## Figures"):], re.M))
    assert made and listed == made, f"docs/outputs.md's figures: {sorted(listed)}; the rules write {sorted(made)}"
    tutorial = (REPO / "docs" / "tutorial.md").read_text()
    unread = [name for name in sorted(made) if f"**`{name}.png`" not in tutorial]
    assert not unread, f"docs/tutorial.md does not say how to read {unread}"


def test_the_license_and_citation_say_mit_and_the_cycleio_developers():
    import tomllib

    import yaml

    license_text = (REPO / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "the cycleio developers" in license_text
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert {"cff-version", "message", "title", "authors"} <= set(citation)
    assert citation["license"] == "MIT" and citation["authors"] == [{"name": "the cycleio developers"}]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert str(citation["version"]) == project["version"]


# Paths the docs name in other projects' repositories.
ELSEWHERE = {"workflow/rocoto/gfs_tasks.py": "global-workflow's, docs/archive.md"}


def repository_paths() -> list[tuple[str, str]]:
    """(page, path) of every code span in the docs' prose that names a file or folder of the repository, or a module
    by its path in the package (`storage/copyengine.py`); the reader's own files (PLACEHOLDERS) left out."""
    found: dict[str, str] = {}
    for page in PAGES:
        for span in re.findall(r"`([^`\n]+)`", FENCE.sub("", page.read_text())):
            for word in span.split():
                if word in PLACEHOLDERS or word in ELSEWHERE:
                    continue
                if re.fullmatch(r"(tests|scripts|ci|config|bench|profiles|rules|report|envs)/[\w./-]*[\w/]", word) \
                        or re.fullmatch(r"([a-z_]+/)+[a-z_0-9]+\.py", word):
                    found.setdefault(word, str(page.relative_to(REPO)))
    return sorted((page, path) for path, page in found.items())


def test_the_docs_name_repository_paths():
    assert len(repository_paths()) > 30


@pytest.mark.parametrize("page,path", repository_paths())
def test_every_repository_path_the_docs_name_exists(page, path):
    assert (REPO / path).exists() or (path.endswith(".py") and (PACKAGE / path).exists()), \
        f"{page}: `{path}` is neither in the repository nor a module of the package"


def test_every_page_the_code_and_config_point_to_exists():
    """Error messages, comments and captions send the reader to docs pages: each must be there."""
    sources = [REPO / "Snakefile", REPO / "Makefile", *PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.yaml"),
               *(REPO / "rules").glob("*.smk"), *(REPO / "config").rglob("*.yaml"), *(REPO / "report").glob("*"),
               *(REPO / "profiles").rglob("*.yaml")]
    named = {(str(source.relative_to(REPO)), page) for source in sources if source.is_file()
             for page in re.findall(r"docs/[\w/-]+\.md", source.read_text(errors="replace"))}
    assert named
    missing = sorted(f"{source}: {page}" for source, page in named if not (REPO / page).exists())
    assert not missing, "\n".join(missing)


def test_the_cli_page_names_every_command_a_person_runs():
    text = (REPO / "docs" / "cli.md").read_text()
    intro = text[text.index("The commands a person runs:"):text.index(CLI_START)]
    assert set(re.findall(r"`([a-z-]+)`", intro)) == set(USER_COMMANDS)


def stated_defaults() -> list[tuple[str, str, str]]:
    """(page, key, default) of every "`key` ... (default X)" in the docs' prose."""
    found = []
    for page in PAGES:
        text = " ".join(FENCE.sub("", page.read_text()).split())
        for key, default in re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`[^`()]{0,40}\(default `?([^`),:]+)`?[),:]", text):
            found.append((str(page.relative_to(REPO)), key, default.strip()))
    return found


def test_the_docs_state_defaults():
    assert any(key == "benchmarks.replay.cycles" for _, key, _ in stated_defaults())


@pytest.mark.parametrize("page,key,default", stated_defaults())
def test_every_default_the_docs_state_is_the_schemas(page, key, default):
    import json

    node = study_schema()
    for part in key.split("."):
        node = node["properties"][part]
    if default.startswith("`") or "." in default and not default[0].isdigit():  # another key's value
        return
    assert json.dumps(node["default"]) == default or str(node["default"]) == default, \
        f"{page}: `{key}` (default {default}), but the schema's default is {node['default']!r}"
