"""TEST DOUBLE for ``hyper_parallel``: not the package, and not shipped with strategist.

MindFormers 2.0.0 requires ``hyper-parallel~=1.0.0`` (MindSpore's DTensor/FSDP library for its PyNative models),
which PyPI does not serve, and imports it when ``mindformers`` itself is imported. strategist builds MindFormers'
graph-mode training models, which never use it. This stand-in supplies exactly the names MindFormers 2.0.0 imports
from it at import time, so that the tests can exercise strategist's ``mindformers:`` front end on MindFormers 2.0.0:

* every class is an empty placeholder that accepts any arguments (MindFormers builds ``Shard(0)`` and
  ``Replicate()`` placement tables at import time) and does nothing else;
* every function raises ``NotImplementedError``, so anything that does use hyper_parallel fails loudly, except
  ``get_platform``, which MindFormers calls at import time: it answers a platform whose every attribute is
  such a function;
* a name MindFormers did not import at 2.0.0 is an ``AttributeError``, as in a module without it.

Only the tests put this directory on ``sys.path`` (tests/conftest.py, when MindFormers 2.x is installed without
hyper_parallel); ``pytest`` does not collect it (``collect_ignore_glob``).
"""
from __future__ import annotations

import sys
import types

# module -> the names MindFormers 2.0.0 imports from it at import time (its ``from hyper_parallel... import``
# lines that run when ``mindformers`` and ``mindformers.models`` are imported)
NAMES = {
    "hyper_parallel": ["DFunction", "DTensor", "DeviceMesh", "PipelineStage", "SkipDTensorDispatch", "shard_module"],
    "hyper_parallel.core": [],
    "hyper_parallel.core.activation_checkpoint": ["CheckpointPolicy", "SwapManager", "checkpoint_wrapper",
                                                  "swap_wrapper"],
    "hyper_parallel.core.context_parallel": [],
    "hyper_parallel.core.context_parallel.async_context_parallel": ["AsyncContextParallel"],
    "hyper_parallel.core.context_parallel.context_parallel": ["ContextParallel"],
    "hyper_parallel.core.distributed_checkpoint": ["get_global_layout"],
    "hyper_parallel.core.dtensor": [],
    "hyper_parallel.core.dtensor.dtensor": ["DTensor", "distribute_tensor"],
    "hyper_parallel.core.dtensor.layout": ["_infer_slice_area_by_rank"],
    "hyper_parallel.core.dtensor.placement_types": ["Placement", "Replicate", "Shard"],
    "hyper_parallel.core.dtensor.redistribute_infer": ["RedistributionOperatorInfer"],
    "hyper_parallel.core.fully_shard": [],
    "hyper_parallel.core.fully_shard.api": ["HSDPModule", "MixedPrecisionPolicy", "fully_shard"],
    "hyper_parallel.core.fully_shard.utils": ["CPUOffloadPolicy", "OffloadPolicy"],
    "hyper_parallel.core.pipeline_parallel": [],
    "hyper_parallel.core.pipeline_parallel.hook_coordinator": ["HookCoordinator"],
    "hyper_parallel.core.shard": [],
    "hyper_parallel.core.shard.sharding_plan": ["ShardingPlan"],
    "hyper_parallel.custom_ops": [],
    "hyper_parallel.custom_ops.experimental": ["npu_lightning_indexer_v2", "npu_mhc_post", "npu_mhc_pre_sinkhorn",
                                               "npu_sparse_attn_shared_kv",
                                               "npu_sparse_lightning_indexer_grad_kl_loss_v2"],
    "hyper_parallel.platform": ["get_platform"],
}
IS_TEST_DOUBLE = True


class _Placeholder:
    """A hyper_parallel class as MindFormers names it at import time: built with any arguments, nothing more."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _function(module: str, name: str):
    def unavailable(*args, **kwargs):
        raise NotImplementedError(f"{module}.{name}: hyper_parallel is a test double here (tests/doubles)")
    unavailable.__name__ = unavailable.__qualname__ = name
    unavailable.__module__ = module
    return unavailable


class _Platform:
    """What ``hyper_parallel.platform.get_platform()`` answers here: every attribute raises when called."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _function("hyper_parallel.platform.Platform", name)


def _get_platform() -> _Platform:
    return _Platform()


def _fill(module: types.ModuleType, names: list[str]) -> None:
    for name in names:
        if (module.__name__, name) == ("hyper_parallel.platform", "get_platform"):
            value = _get_platform
        elif name.lstrip("_")[:1].isupper():
            value = type(name, (_Placeholder,), {"__module__": module.__name__})
        else:
            value = _function(module.__name__, name)
        setattr(module, name, value)


def _install() -> None:
    """The package and its submodules into sys.modules, each submodule an attribute of its parent."""
    _fill(sys.modules[__name__], NAMES[__name__])
    for full in sorted(NAMES, key=len)[1:]:
        mod = types.ModuleType(full, f"test double of {full}")
        mod.__path__ = []
        mod.IS_TEST_DOUBLE = True
        _fill(mod, NAMES[full])
        sys.modules[full] = mod
        parent, _, leaf = full.rpartition(".")
        setattr(sys.modules[parent], leaf, mod)


if __name__ == "hyper_parallel":
    _install()
