import functools
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
MODELS = os.path.join(ROOT, "tests", "models")
os.environ.setdefault("GLOG_v", "3")
collect_ignore_glob = ["models/*", "collectives.py", "doubles/*"]

# MindFormers 2.x imports hyper_parallel at import time, a package PyPI does not serve: where it is not installed,
# the tests stand tests/doubles/hyper_parallel in for it (a test double supplying the names MindFormers imports;
# strategist itself never puts it on the path; a test's child process gets it only if the test says so).


def _needs_hyper_parallel_double() -> bool:
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version
    try:
        major = int(version("mindformers").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return False
    return major >= 2 and importlib.util.find_spec("hyper_parallel") is None


if _needs_hyper_parallel_double():
    sys.path.insert(0, os.path.join(ROOT, "tests", "doubles"))

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
def _graph(target: str, kwargs: tuple = (), inputs: tuple = (), training: bool = True):
    from strategist import load_graph
    return load_graph(target, list(inputs), list(kwargs), training=training)


@pytest.fixture(scope="session")
def graph_of():
    """graph_of("examples/mlp.py:MegatronMLP", "hidden=64", inputs=(...)) -> cached OpGraph, emulating the training
    compile (strategist's default) or, ``training=False``, the compile of the Cell as built (``--eval``): a test
    holding MindSpore's answer for one compile asks for that compile."""
    def get(target, *kwargs, inputs=(), training=True):
        if not os.path.isabs(target.split(":")[0]):
            target = os.path.join(ROOT, target)
        return _graph(target, tuple(kwargs), tuple(inputs), training)
    return get


@pytest.fixture(scope="session", autouse=True)
def no_output_folder():
    """Nothing strategist runs writes into the working directory: MindFormers logs into ./output/ unless
    LOG_MF_PATH points elsewhere (strategist points it at a private temporary directory). The suite fails if
    an output/ folder appears in the working directory or the project root while it runs."""
    dirs = {os.getcwd(), ROOT}
    before = {d for d in dirs if os.path.exists(os.path.join(d, "output"))}
    yield
    appeared = sorted(d for d in dirs - before if os.path.exists(os.path.join(d, "output")))
    assert not appeared, f"an output/ folder appeared in {', '.join(appeared)} (MindFormers' log, LOG_MF_PATH unset)"


def serial(graph):
    """``graph`` advised by the serial sum of communication and compute (``--choose-by-serial-sum``) instead of the
    default scheduled step: what a test of an advisor's mechanism on a small model pins. On the 910B's HCCS a 2- or
    4-card group runs its collectives at 18-30 GB/s against 72 for all 8 (rules/hardware/atlas-800t-a2.yaml), and the
    data-parallel gradient reductions run after the backward (MindSpore's default), so by the schedule most of these
    small models train fastest data parallel over every device -- configure nothing -- and the mechanism would have
    no anchor to show. Each such test says what the schedule chooses instead."""
    from strategist.cost.step import StepOptions
    return graph.with_meta(step_options=StepOptions(choose_by_schedule=False))


def serial_step():
    """The step options of :func:`serial`, for ``advise_model(..., step=)``."""
    from strategist.cost.step import StepOptions
    return StepOptions(choose_by_schedule=False)
