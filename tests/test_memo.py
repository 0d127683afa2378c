"""strategist.memo: every cache bounded, made in one place, and forgotten by one clear_caches()."""
import ast
import os

import pytest

from strategist import memo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "strategist")

#: module-level containers that are state, not caches (each with what it holds)
STATE = {
    "strategist.cli._REPORT_OUT": "the report files written in this run (named in the closing line)",
    "strategist.frontend.mindformers.world.BUILD_LOG": "MindFormers' warnings during the build in progress",
    "strategist.frontend.mindone.build._MATMUL_CONV1D": "the Conv1D classes patched while a mindone model builds",
    "strategist.progress._CHILDREN": "child processes to stop on Ctrl-C",
    "strategist.progress._WORKERS": "worker pools to stop on Ctrl-C",
    "strategist.sweep._WORKER": "a pool or Ray worker process's WorkerState, read only by its task entry points",
    "strategist.memo.REGISTRY": "the caches themselves",
}


def _module_level_containers():
    """(module.name, kind) of every module-level assignment of an empty dict/list/set or a dict-making call."""
    found = []
    for base, _, files in os.walk(PKG):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(base, f)
            mod = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")
            for node in ast.parse(open(path).read()).body:
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                    continue
                v = node.value
                empty = isinstance(v, (ast.Dict, ast.List, ast.Set)) and not (
                    getattr(v, "keys", None) or getattr(v, "elts", None))
                call = isinstance(v, ast.Call) and getattr(v.func, "id", getattr(v.func, "attr", None)) in (
                    "dict", "list", "set", "OrderedDict", "defaultdict", "WeakKeyDictionary", "WeakValueDictionary")
                if empty or call:
                    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                    found.append(f"{mod}.{ast.unparse(target)}")
    return found


def test_no_module_level_cache_outside_the_helper():
    """A module-level dict, list or set that is no listed state is a cache made by hand: make it with
    strategist.memo (bounded, cleared by clear_caches)."""
    assert sorted(set(_module_level_containers()) - set(STATE)) == []


def test_no_functools_cache_outside_the_helper():
    hand = []
    for base, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py") and f != "memo.py":
                text = open(os.path.join(base, f)).read()
                if "lru_cache" in text or "functools.cache" in text or "@cache\n" in text:
                    hand.append(os.path.relpath(os.path.join(base, f), ROOT))
    assert hand == []


def test_a_table_empties_when_a_new_key_would_pass_its_size():
    t = memo.Table("test table", 3)
    for k in "abc":
        t[k] = k
    t["a"] = "again"                     # a key it holds: no eviction
    assert dict(t) == {"a": "again", "b": "b", "c": "c"}
    t["d"] = "d"
    assert dict(t) == {"d": "d"}
    assert t.setdefault("e", 5) == 5 and t.setdefault("e", 6) == 5


def test_by_identity_keys_on_the_object_not_its_equal():
    m = memo.ByIdentity("test by identity", 2)
    a, b = [1], [1]                      # equal, not the same
    assert m.get((a,), "k", lambda: "a") == "a"
    assert m.get((b,), "k", lambda: "b") == "b"
    assert m.get((a,), "k", lambda: "again") == "a"     # a used last: b is the least recent
    m.get(([2],), "k", lambda: "c")
    assert m.get((b,), "k", lambda: "b2") == "b2" and len(m) == 2
    with pytest.raises(ValueError, match="exists already"):
        memo.ByIdentity("test by identity", 2)
    memo.REGISTRY.pop("test by identity")


def test_clear_caches_forgets_every_cache_an_advice_filled():
    """After an advice on a model file the search's, pricing's, the step and memory models' and the front end's
    caches hold entries; propagate.clear_caches() (memo.clear_caches) leaves every one empty."""
    from strategist.api import advise_model
    from strategist.propagate import clear_caches
    from strategist.cost.step import estimate
    advice = advise_model(os.path.join(ROOT, "examples/mlp.py:MegatronMLP"), "dp=2,tp=4")
    estimate(advice.plan).memory        # the step estimate's memory, as every report shows it
    filled = {name for name, n in memo.sizes().items() if n}
    for name in ("search: choices", "pricing: edge and operator prices", "step model: base rows per plan",
                 "memory: activations per plan and operator set", "front end: proto field tables"):
        assert name in filled
    clear_caches()
    assert {name: n for name, n in memo.sizes().items() if n} == {}
