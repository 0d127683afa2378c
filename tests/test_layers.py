"""The package's layering, checked as ``make lint`` checks it: ruff over the code, import-linter's contracts in
pyproject.toml (the layers of the data path; MindSpore imported only by the front ends and the verify child),
and what neither tool says: no import cycle between modules (imports inside functions included), no private
name imported from another module, and no module or function past its size without a reason."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

import grimp
import networkx as nx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "strategist")
BIN = os.path.dirname(sys.executable)
MAX_MODULE_LINES = 1000
MAX_FUNCTION_LINES = 80


def _modules():
    for base, _, files in os.walk(PKG):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(base, f)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield (rel[: -len(".__init__")] if rel.endswith(".__init__") else rel), path


def _lint_imports(root: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=root)
    return subprocess.run([os.path.join(BIN, "lint-imports"), "--config", os.path.join(root, "pyproject.toml"),
                           "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_ruff_passes():
    r = subprocess.run([os.path.join(BIN, "ruff"), "check", "--no-cache", "strategist", "tests", "bench"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_import_contracts_hold():
    r = _lint_imports(ROOT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


@pytest.mark.parametrize("where, imports", [
    ("vocab/probe_upward.py", "from ..engine import search  # noqa: F401\n"),        # the bottom reaching up
    ("engine/probe_upward.py", "from ..advice import advisor  # noqa: F401\n"),      # the search reaching the advice
    ("cost/probe_mindspore.py", "import mindspore  # noqa: F401\n"),                 # MindSpore outside the front ends
])
def test_an_import_from_a_wrong_layer_breaks_the_contract(tmp_path, where, imports):
    """A module added where it does not belong makes the contract fail (on a copy of the package)."""
    shutil.copytree(PKG, tmp_path / "strategist", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    (tmp_path / "strategist" / where).write_text(imports)
    r = _lint_imports(str(tmp_path))
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout[-3000:]
    assert where.split("/")[1][:-3] in r.stdout


def test_no_import_cycles():
    """Between modules, counting imports inside functions (which would otherwise hide a cycle)."""
    g = grimp.build_graph("strategist")
    dg = nx.DiGraph((m, d) for m in g.modules for d in g.find_modules_directly_imported_by(m)
                    if d.startswith("strategist"))
    cycles = sorted(sorted(c) for c in nx.strongly_connected_components(dg) if len(c) > 1)
    assert cycles == [], cycles


def _private_imports() -> list[str]:
    out = []
    for mod, path in _modules():
        pkg = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                out += [f"{mod}:{node.lineno} imports {a.name} from {target}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_private_names_across_modules():
    """A name another module imports is part of its module's interface: public."""
    assert _private_imports() == []


def _reason(lines: list[str], start: int, end: int | None = None) -> bool:
    """A ``# size: ...`` line among the lines from ``start`` (to ``end``, else the next four) says why the unit is as
    long as it is."""
    return any(line.strip().startswith("# size:") for line in lines[start: end if end is not None else start + 4])


def _body_start(node) -> int:
    """The line (1-based) of a function's first statement after its docstring."""
    body = node.body
    doc = body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
    return (body[1] if doc and len(body) > 1 else body[0]).lineno


def test_modules_and_functions_are_short_or_say_why():
    long = []
    for mod, path in _modules():
        lines = open(path).read().split("\n")
        if len(lines) > MAX_MODULE_LINES and not any(line.startswith("# size:") for line in lines[:40]):
            long.append(f"{mod}: {len(lines)} lines")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and not _reason(lines, node.lineno, _body_start(node)):
                    long.append(f"{mod}.{node.name}: {n} lines")
    assert long == [], long


def test_one_dtype_size_table():
    """Bytes per element come from one table (strategist.vocab.graph.DTYPE_BYTES): no other module spells one out."""
    spelled = []
    for mod, path in _modules():
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Dict) and {"float16", "float32"} <= {k.value for k in node.keys
                                                                          if isinstance(k, ast.Constant)}:
                if all(isinstance(v, ast.Constant) and isinstance(v.value, int) for v in node.values):
                    spelled.append(f"{mod}:{node.lineno}")
    assert spelled == ["strategist.vocab.graph:22"], spelled


def test_collective_labels_are_read_nowhere():
    """Collective steps travel typed (strategist.vocab.comm.CommStep) from the redistribution planner to the
    reports: no module outside report/ holds a regex over their labels (``n=8, group=[...]``, a ``grad ``/``backward
    `` prefix), and report/ only prints them."""
    readers = []
    for mod, path in _modules():
        if mod.startswith("strategist.report") or mod == "strategist.vocab.comm":
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("compile", "match", "search",
                                                                                  "findall", "sub", "fullmatch"):
                for arg in node.args[:1]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and (
                            "group=" in arg.value or "n=(" in arg.value or "(backward|grad)" in arg.value):
                        readers.append(f"{mod}:{node.lineno}")
    assert readers == [], readers


def test_one_rule_decides_whether_configuration_pays():
    """Whether a line pays and whether one step is faster are decided by strategist.advice.worth alone: no module of
    the advice or compare does threshold arithmetic on step seconds itself."""
    import re
    hand = re.compile(r"PAY_WORTH \*|\* PAY_WORTH|min\(PAY_|1 [+-] 1e-\d+\)|1e-(9|12) \* ")
    found = []
    for mod, path in _modules():
        if mod == "strategist.advice.worth" or not (mod.startswith("strategist.advice") or mod == "strategist.compare"):
            continue
        for k, line in enumerate(open(path), 1):
            if hand.search(line):
                found.append(f"{mod}:{k}: {line.strip()}")
    assert found == [], found
