"""The README, the changelog and the documentation site: a short README with the two commands and working
links, reference pages that are what the code gives, a site that builds in strict mode, and no lab-notebook
history or path outside the repository anywhere in the project's text."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _gen_reference():
    spec = importlib.util.spec_from_file_location("gen_reference", os.path.join(ROOT, "docs", "gen_reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_is_short_and_has_the_two_commands():
    text = _read("README.md")
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^make \w+", quick, flags=re.M)
    assert commands == ["make demo", "make test"]


def test_readme_has_the_support_matrix_and_every_command():
    text = _read("README.md")
    for cell in ("| MindSpore | 2.9.0 or 2.10.0 ", "| MindFormers | 1.9.0 with MindSpore 2.9.0, or 2.0.0 with MindSpore "
                 "2.10.0 ", "| Python | 3.11 |", "| OS | Linux x86_64"):
        assert cell in text, cell
    # the matrix's MindSpore versions are the ones pyproject.toml admits (and the two make test runs)
    import tomllib
    deps = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]["dependencies"]
    assert "mindspore>=2.9.0,<2.11" in deps, deps
    from strategist.cli import _parser
    sub = next(a for a in _parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    for command in sub.choices:
        assert f"[`{command}`](docs/reference/cli.md#strategist-{command})" in text, command


def _headings_slugs(md: str) -> set[str]:
    out = set()
    for h in re.findall(r"^#+ (.+)$", md, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-")
        out.add(slug)
    return out


def test_readme_links_point_at_files_and_headings_that_exist():
    text = _read("README.md")
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert len(links) > 20
    for path, anchor in links:
        if path.startswith("http"):
            continue
        target = os.path.join(ROOT, path)
        assert os.path.exists(target), path
        if anchor:
            assert anchor in _headings_slugs(_read(path)), (path, anchor)


def test_changelog_keeps_a_changelog_by_version():
    text = _read("CHANGELOG.md")
    version = re.search(r'^version = "([^"]+)"', _read("pyproject.toml"), flags=re.M).group(1)
    assert "[Keep a Changelog](https://keepachangelog.com/" in text
    heads = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert heads[0] == "Unreleased" and version in heads
    for section in re.findall(r"^### (\w+)", text, flags=re.M):
        assert section in ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"), section


def test_generated_reference_pages_are_what_the_code_gives():
    gen = _gen_reference()
    for name, make in gen.PAGES.items():
        assert _read("docs", "reference", name) == make(), f"docs/reference/{name}: run python docs/gen_reference.py"


def test_cli_reference_lists_every_option_of_every_command():
    import argparse
    from strategist.cli import _parser
    page = _read("docs", "reference", "cli.md")
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in sub.choices.items():
        section = page.split(f"## strategist {name}\n", 1)[1].split("\n## strategist ", 1)[0]
        for a in sp._actions:
            for opt in a.option_strings:
                if opt not in ("-h", "--help"):
                    assert f"`{opt}`" in section, (name, opt)


def test_operator_reference_names_the_operator_infos():
    page = _read("docs", "reference", "operators.md")
    assert "| `MatMul` | `MatMulInfo` |" in page
    assert "| `Custom` | `CustomInfo` | - | left out:" in page      # a LEFT_OUT entry with its reason
    assert "| `Tile` | `TileInfo` |" in page and "narrower:" in page


def test_file_formats_come_from_the_schemas():
    from strategist.files import schema
    page = _read("docs", "reference", "file-formats.md")
    for model in (schema.AnchorSpec, schema.RulesSpec, schema.HardwareSpec):
        for field in model.model_fields:
            assert f"`{field}`" in page or f".{field}`" in page, (model.__name__, field)


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra is not installed "
                    "(pip install -e '.[docs]'; make test installs it)")
def test_site_builds_in_strict_mode(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra is not installed")
def test_a_broken_link_fails_the_strict_build(tmp_path):
    shutil.copytree(os.path.join(ROOT, "docs"), tmp_path / "docs")
    shutil.copy(os.path.join(ROOT, "mkdocs.yml"), tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a", encoding="utf-8") as f:
        f.write("\nSee [the missing page](no-such-page.md).\n")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode != 0 and "no-such-page.md" in r.stderr, r.stderr[-2000:]


# --------------------------------------------------------------------------------------
# no lab-notebook history, no path outside the repository

_TEXT = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".sh")
_WHERE = ["README.md", "CHANGELOG.md", "Makefile", "pyproject.toml", "mkdocs.yml", ".ci", "docs", "strategist",
          "tests", "bench", "examples", "rules"]
_SKIP = {os.path.join("tests", "fixtures")}     # MindSpore's recorded answers and IR dumps: data, not text
_HISTORY = re.compile(r"\bsessions? \d+|\bwork periods?\b|\bnotes for the lead\b|\bhelper notes\b", re.I)
_OUTSIDE = re.compile(r"(?<![\w.~])/(?:work|home|Users|root)/|(?<![\w.])/tm[p]/(?!strategist-run-)|\.\./shared\b")


def _project_files():
    for top in _WHERE:
        path = os.path.join(ROOT, top)
        if os.path.isfile(path):
            yield top
            continue
        for base, dirs, files in os.walk(path):
            rel = os.path.relpath(base, ROOT)
            dirs[:] = [d for d in dirs if os.path.join(rel, d) not in _SKIP and not d.startswith((".", "__"))]
            for f in files:
                if f.endswith(_TEXT) or f == "run":
                    yield os.path.join(rel, f)


def test_no_history_or_outside_paths_in_the_project():
    files = list(_project_files())
    assert len(files) > 100 and os.path.join("docs", "notes", "ms_algo.md") in files
    found = []
    for rel in files:
        for n, line in enumerate(_read(rel).splitlines(), 1):
            for rx, what in ((_HISTORY, "history"), (_OUTSIDE, "a path outside the repository")):
                m = rx.search(line)
                if m:
                    found.append(f"{rel}:{n}: {what}: {m.group(0)!r}")
    assert not found, "\n".join(found[:40])


def test_the_checks_catch_what_they_look_for():
    s, w, t = "sess" + "ion", "/wo" + "rk/", "/tm" + "p/"     # split, so that this file passes its own check
    assert _HISTORY.search(f"as measured in {s} 26") and _HISTORY.search(f"{s.title()}s 12-20")
    assert _HISTORY.search("the numbered work " + "period")
    assert _OUTSIDE.search(f"see {w}notes/coverage.md") and _OUTSIDE.search("`../sha" + "red/spec/x.md`")
    assert _OUTSIDE.search(f"raw logs in {t}rd/full.txt")
    assert not _OUTSIDE.search("docs/notes/coverage.md") and not _OUTSIDE.search("/tmp/strategist-run-*")
    assert not _HISTORY.search("one training session's step")
