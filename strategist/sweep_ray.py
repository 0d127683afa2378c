"""The sweep's meshes as Ray tasks (``strategist sweep --ray ADDRESS``), for sweeps that outgrow one machine: the
graph goes into Ray's object store once, each mesh is one task running what a local worker runs
(:func:`strategist.sweep.advise_mesh_task`), results arrive as they complete, a round of tasks at a time. Ray is
an optional extra (``pip install 'strategist[ray]'``); ``ADDRESS`` is a running cluster's (``auto``, ``ray://host:10001``) or
``local`` for a Ray started on this machine for the sweep."""
from __future__ import annotations

import contextlib

from .errors import InputSpecError


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputSpecError("--ray needs Ray: pip install 'strategist[ray]' (or drop --ray to use this machine's "
                             "cores)") from None
    return ray


@contextlib.contextmanager
def ray_runner(address: str, state: tuple, task):
    """``run(tasks)`` on Ray, for the length of the block: ``(position, result)`` of each task
    (:class:`strategist.sweep.Task`) as it completes, ``task(state, t)`` running one (the state put into the object
    store once). A Ctrl-C cancels the tasks still running."""
    ray = import_ray()
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise InputSpecError(f"--ray {address}: cannot connect ({str(err).splitlines()[0]}); give a running "
                                 f"cluster's address (auto, ray://host:10001) or local") from None
    remote = ray.remote(task)
    ref = ray.put(state)
    pending: dict = {}

    def run(tasks):
        pending.update({remote.remote(ref, t): j for j, t in enumerate(tasks)})
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for r in done:
                yield pending.pop(r), ray.get(r)
    try:
        yield run
    except BaseException:
        for r in pending:
            ray.cancel(r, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
