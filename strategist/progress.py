"""What the user sees while long work runs: progress bars on stderr, Ctrl-C, and a closed stdout.

Progress (:func:`task`, :func:`bar`) is drawn with ``tqdm`` on **stderr only, and only when stderr is
a terminal** -- never in ``--format json`` stdout, never in a pipe or a log file. The hooks are cheap
no-ops otherwise, so library code calls them unconditionally::

    with progress.task("extracting the graph"):           # a spinner line for one long step
        graph = extract(...)
    for name in progress.bar(candidates, "minimality checks"):   # a bar over a loop
        ...

:func:`run_guarded` runs the CLI: Ctrl-C (SIGINT) at any moment -- during MindSpore's import, inside its
C++ compile, during propagation or the report, once or several times -- prints ``strategist: interrupted``
once and exits 130 (SIGTERM: 143), after killing this run's child processes and removing its private
temporary directory. One function, :func:`_leave`, performs that exit, whether the Python handler or the
watcher thread (which sees a signal even while the main thread is inside C++) gets there first; a closed (``| head``) or full (``> /dev/full``)
stdout ends quietly with a non-zero code.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

_ENABLED: bool | None = None      # None: decide from stderr (a TTY) on first use
_RUN_TMP: str | None = None


def enabled() -> bool:
    """Progress is drawn only when stderr is a terminal (``STRATEGIST_PROGRESS=0/1`` overrides)."""
    if _ENABLED is not None:
        return _ENABLED
    env = os.environ.get("STRATEGIST_PROGRESS")
    if env in ("0", "1"):
        return env == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def set_enabled(on: bool | None) -> None:
    """Force progress on/off (``None``: back to "when stderr is a terminal")."""
    global _ENABLED
    _ENABLED = on


def bar(iterable, desc: str, total: int | None = None):
    """``iterable`` with a progress bar on stderr when it is a terminal, else ``iterable`` itself."""
    mark(desc)
    if not enabled():
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, desc=desc, total=total, file=sys.stderr, leave=False, dynamic_ncols=True,
                unit="", mininterval=0.2)


def mark(desc: str) -> None:
    """Test hook: with ``STRATEGIST_PHASE_FILE`` set, each step's name is appended there as it starts
    (the interrupt test sends Ctrl-C at a chosen step). Nothing is written otherwise."""
    path = os.environ.get("STRATEGIST_PHASE_FILE")
    if path:
        with contextlib.suppress(OSError), open(path, "a") as f:
            f.write(desc + "\n")


@contextlib.contextmanager
def task(desc: str):
    """A one-line spinner with elapsed seconds on stderr (terminal only) while a long step runs."""
    mark(desc)
    if not enabled():
        yield
        return
    from tqdm import tqdm
    stop = threading.Event()
    t = tqdm(total=None, desc=desc, file=sys.stderr, leave=False, bar_format="{desc} {elapsed}",
             mininterval=0.5)

    def tick():
        while not stop.wait(0.5):
            with contextlib.suppress(Exception):
                t.refresh()
    th = threading.Thread(target=tick, daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join(1)
        with contextlib.suppress(Exception):
            t.close()


# ----------------------------------------------------------------------------------------------
# Ctrl-C and stdout


_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
_GRACE_S = 2.0                    # how long a second exit path waits for the first before ending the process
_LEAVING = threading.RLock()      # held by the one path that performs the exit
_leaving = False                  # set by that path once it holds the lock
_CHILDREN: set[int] = set()       # process groups of this run's children (verify's MindSpore child)
_WORKERS: set[int] = set()        # worker processes in this run's own group (the sweep's pool)
_EXIT = os._exit                  # taken now: a model file being imported runs with os._exit refused
_RAISING = 0                      # inside interrupt_raises(): the first SIGINT raises KeyboardInterrupt
_SIGINTS = [0]                    # SIGINTs the watcher has seen inside interrupt_raises()
_RAISED = threading.Event()       # the main thread has raised the first one
_ARMED = threading.Event()        # the backstop is running
_BACKSTOP_S = 10.0                # how long the raised KeyboardInterrupt has to end the run before _leave does


@contextlib.contextmanager
def interrupt_raises():
    """Work that can stop early with what it has (``strategist sweep``): inside, the first Ctrl-C raises
    ``KeyboardInterrupt`` in the main thread instead of leaving, so the caller can report its partial result. The
    run still ends within ``_BACKSTOP_S`` seconds if that does not happen (the main thread inside C code), and a
    second Ctrl-C, or a SIGTERM, leaves at once as anywhere else."""
    global _RAISING
    _RAISING += 1
    try:
        yield
    finally:
        _RAISING -= 1


def detach_worker() -> None:
    """In a worker process forked from a run (the sweep's pool): leave the run's exit to the run. The worker ignores
    SIGINT (a Ctrl-C reaches the whole process group; the run stops its workers itself), takes SIGTERM's default,
    writes no signal into the run's wakeup pipe (inherited across the fork, it would reach the run's watcher as the
    run's own signal) and owns none of the run's children or temporary directory."""
    global _RUN_TMP
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _CHILDREN.clear()
    _WORKERS.clear()
    _RUN_TMP = None


def add_worker(pid: int) -> None:
    """Record a worker process of this run (in the run's own process group): an interrupted run kills it."""
    _WORKERS.add(pid)


def remove_worker(pid: int) -> None:
    _WORKERS.discard(pid)


def add_child(pgid: int) -> None:
    """Record a child process group: an interrupted run kills it before exiting."""
    _CHILDREN.add(pgid)


def remove_child(pgid: int) -> None:
    _CHILDREN.discard(pgid)


def _arm_backstop() -> None:
    if not _ARMED.is_set():
        _ARMED.set()
        t = threading.Timer(_BACKSTOP_S, _leave, args=(130,))
        t.daemon = True
        t.start()


def _leave(code: int) -> None:
    """The one exit of an interrupted run: one line, this run's children killed and temporary files
    removed, ``os._exit(code)`` (which skips MindSpore's C++ destructors, which abort when torn down
    mid-import or mid-compile).

    Whoever comes first (the Python handler in the main thread, or the watcher thread) performs it.
    A later signal never blocks on it: re-entered in the thread that is leaving (a second Ctrl-C
    arriving inside this function), it returns so the first call goes on; from another thread it
    gives the first path ``_GRACE_S`` seconds, then ends the process itself."""
    global _leaving
    if _LEAVING.acquire(blocking=False):
        if _leaving:                       # re-entered by a signal in the thread already leaving
            _LEAVING.release()
            return
        _leaving = True
        try:
            with contextlib.suppress(Exception):
                os.write(2, (b"\r\x1b[K" if enabled() else b"") + b"strategist: interrupted\n")
            for pgid in list(_CHILDREN):
                with contextlib.suppress(OSError):
                    os.killpg(pgid, signal.SIGKILL)
            for pid in list(_WORKERS):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if _RUN_TMP:
                _remove_run_tmp(_RUN_TMP)
        finally:
            _EXIT(code)
    time.sleep(_GRACE_S)                   # the other thread is leaving; it ends the process first
    _EXIT(code)


def _remove_run_tmp(path: str) -> None:
    """Remove the run's temporary directory while the main thread may still write into it (MindSpore's compile,
    deep in C++, goes on until the exit): a file it adds between the listing and the removal leaves the directory
    behind, so the removal is repeated until it is gone (at most half of ``_GRACE_S``, the other path's wait)."""
    deadline = time.monotonic() + _GRACE_S / 2
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path) or time.monotonic() > deadline:
            return
        time.sleep(0.005)


def _interrupted() -> None:
    _leave(130)


def _on_signal(signum, frame):
    if _RAISING and signum == signal.SIGINT and not _RAISED.is_set():
        _RAISED.set()
        _arm_backstop()
        raise KeyboardInterrupt
    _leave(_EXIT_CODES.get(signum, 128 + int(signum)))


def _watch(rfd: int) -> None:
    """The C-level signal handler writes the signal number to ``rfd`` at once, even while the main
    thread is deep in MindSpore's C++ (where Python handlers wait); this thread acts on it."""
    while True:
        try:
            data = os.read(rfd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            with contextlib.suppress(OSError):
                os.close(rfd)
            return
        if _RAISING and signal.SIGINT in data and signal.SIGTERM not in data:
            _SIGINTS[0] += data.count(signal.SIGINT)
            if _SIGINTS[0] < 2:             # the first Ctrl-C: the main thread's handler raises it
                _arm_backstop()
                continue
            _leave(130)
        for signum, code in _EXIT_CODES.items():
            if signum in data:
                _leave(code)


def _rearm() -> None:
    """MindSpore's import and compile may install their own SIGINT handling; take it back."""
    for signum in _EXIT_CODES:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signum) is not _on_signal:
                signal.signal(signum, _on_signal)


def rearm_interrupts() -> None:
    """Call after a step that may have replaced the SIGINT handler (importing MindSpore, compiling)."""
    if _RUN_TMP is not None:
        _rearm()


def _stdout_failed(err: OSError) -> int:
    """Closed pipe: quiet, 141 like a shell's SIGPIPE. Full disk: one line, 1."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if err.errno == errno.EPIPE:
        return 141
    with contextlib.suppress(OSError):
        os.write(2, f"strategist: error: cannot write the output: {err.strerror}\n".encode())
    return 1


class _ClosedStdout:
    """``sys.stdout`` when the process has none: a write is a broken pipe (quiet, non-zero)."""

    encoding = "utf-8"

    def write(self, text):
        raise BrokenPipeError(errno.EPIPE, "stdout is closed")

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        raise OSError(errno.EBADF, "stdout is closed")


def leave_with(code) -> None:
    """End the process now with ``code`` (``SystemExit``'s: None is 0, a message is printed and is 1), stdout and
    stderr flushed, skipping the interpreter's shutdown (where signals would take their default action again)."""
    if code is not None and not isinstance(code, int):
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = code or 141
        except (OSError, ValueError, AttributeError):
            pass
    _EXIT(code or 0)


def run_guarded(fn, *args, restore: bool = True) -> int:
    """Run ``fn(*args)`` (the CLI body) under strategist's Ctrl-C and stdout handling; its exit code.
    ``restore=False`` (the ``strategist`` executable, which exits right after): the signal handlers stay, so a
    signal arriving while the process exits still ends it through :func:`_leave`."""
    global _RUN_TMP
    in_main = threading.current_thread() is threading.main_thread()
    saved_handlers = {n: signal.getsignal(n) for n in _EXIT_CODES} if in_main else {}
    saved_tmp = tempfile.tempdir
    saved_wakeup = None
    rfd = wfd = None
    if sys.stdout is None:              # started with stdout closed (>&-): writing to it fails quietly
        sys.stdout = _ClosedStdout()
    if in_main:
        # every temporary file of this run (MindSpore's dumps, verify's scratch) goes under one private
        # directory, removed on any exit, interrupted or not
        _RUN_TMP = tempfile.mkdtemp(prefix="strategist-run-")
        tempfile.tempdir = _RUN_TMP
        for signum in _EXIT_CODES:
            signal.signal(signum, _on_signal)
        with contextlib.suppress(OSError, ValueError):
            rfd, wfd = os.pipe()
            os.set_blocking(wfd, False)
            saved_wakeup = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
            threading.Thread(target=_watch, args=(rfd,), daemon=True, name="strategist-sigint").start()
    try:
        code = fn(*args)
        sys.stdout.flush()
        return code
    except SystemExit:                 # argparse's --help and usage errors
        try:
            sys.stdout.flush()
        except OSError as err:
            return _stdout_failed(err)
        raise
    except KeyboardInterrupt:
        _interrupted()
    except BrokenPipeError as err:
        return _stdout_failed(err)
    except OSError as err:
        if err.errno in (errno.EPIPE, errno.ENOSPC, errno.EDQUOT) or (err.errno in (errno.EBADF, errno.EIO)
                                                                      and _is_stdout_error()):
            return _stdout_failed(err)
        with contextlib.suppress(OSError):
            os.write(2, f"strategist: error: {err.strerror or err}: {err.filename or ''}\n".encode())
        return 2
    finally:
        if in_main:
            with contextlib.suppress(ValueError, OSError):
                signal.set_wakeup_fd(saved_wakeup if saved_wakeup is not None else -1)
            for fd in (wfd,):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            for signum, handler in saved_handlers.items() if restore else ():
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(signum, handler)
            tempfile.tempdir = saved_tmp
            if _RUN_TMP:
                shutil.rmtree(_RUN_TMP, ignore_errors=True)
            _RUN_TMP = None


def _is_stdout_error() -> bool:
    try:
        sys.stdout.flush()
        return False
    except OSError:
        return True
    except ValueError:
        return True
