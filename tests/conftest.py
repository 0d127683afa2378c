import functools
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
MODELS = os.path.join(ROOT, "tests", "models")
os.environ.setdefault("GLOG_v", "3")
collect_ignore_glob = ["models/*", "collectives.py"]

# CI draws the same Hypothesis examples every run (a red CI means a change broke something, not a new
# random draw); locally every run explores new ones, and a failure prints its reproducer.
try:
    from hypothesis import settings as _hsettings
    _hsettings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("CI"):
        _hsettings.load_profile("ci")
except ImportError:  # pragma: no cover
    pass


@functools.lru_cache(maxsize=None)
def _graph(target: str, kwargs: tuple = (), inputs: tuple = ()):
    from strategist import load_graph
    return load_graph(target, list(inputs), list(kwargs))


@pytest.fixture(scope="session")
def graph_of():
    """graph_of("examples/mlp.py:MegatronMLP", "hidden=64", inputs=(...)) -> cached OpGraph."""
    def get(target, *kwargs, inputs=()):
        if not os.path.isabs(target.split(":")[0]):
            target = os.path.join(ROOT, target)
        return _graph(target, tuple(kwargs), tuple(inputs))
    return get
