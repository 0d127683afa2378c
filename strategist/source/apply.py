"""Writing edited sources safely: all files checked first, then each written atomically.

A file is refused, by name, when it changed since the analysis (its hash differs), cannot be written
(an installed site-packages copy: use ``--diff-out`` and apply the patch in your own checkout), or the
edited text does not parse. Each written file keeps a backup beside it (``FILE.strategist-backup``)."""
from __future__ import annotations

import ast
import hashlib
import os
import tempfile

from ..errors import StrategistError

BACKUP_SUFFIX = ".strategist-backup"


class ApplyError(StrategistError):
    """A source file cannot be edited in place."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check(path: str, old_hash: str, new: str) -> None:
    """Refuse (ApplyError naming ``path``) unless ``path`` can take ``new`` in place."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            now = f.read()
    except OSError as err:
        raise ApplyError(f"cannot read {path}: {err.strerror}") from None
    if digest(now) != old_hash:
        raise ApplyError(f"{path} changed since the analysis; run advise again (nothing was written)")
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.stat(path).st_mode & 0o222 or not os.access(path, os.W_OK) or not os.access(d, os.W_OK):
        raise ApplyError(f"{path} is not writable (an installed copy?); nothing was written. Use --diff-out "
                         f"FILE and apply the patch in your own checkout (git apply FILE)")
    try:
        ast.parse(new, filename=path)
    except SyntaxError as err:
        raise ApplyError(f"{path} would not parse after the edit (line {err.lineno}: {err.msg}); nothing "
                         f"was written") from None


def write_atomic(path: str, new: str, old: str) -> str:
    """Backup beside ``path``, then temp file in the same directory, fsync, rename. Returns the backup."""
    path = os.path.abspath(path)
    d = os.path.dirname(path)
    mode = os.stat(path).st_mode & 0o7777
    backup = path + BACKUP_SUFFIX
    for target, text in ((backup, old), (path, new)):
        _replace_with(target, text, mode, d, os.path.basename(path))
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return backup


def write_new(path: str, new: str, old: str | None) -> None:
    """``path`` written atomically (temp file in the same directory, fsync, rename); an existing file is kept
    beside it as its backup."""
    if old is not None:
        write_atomic(path, new, old)
        return
    d = os.path.dirname(os.path.abspath(path)) or "."
    _replace_with(path, new, 0o644, d, os.path.basename(path))


def _replace_with(target: str, text: str, mode: int, d: str, name: str) -> None:
    """``target`` replaced by ``text`` through a temporary file in ``d`` (written, fsynced, given ``mode``,
    renamed), the temporary file removed if anything fails."""
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
