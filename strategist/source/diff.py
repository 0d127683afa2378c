"""Unified diffs with paths relative to each file's repository (or package) root, for ``git apply`` /
``patch -p1`` run in that root."""
from __future__ import annotations

import difflib
import os


def root_of(path: str) -> str:
    """The directory holding ``.git`` above ``path``; else the parent of its outermost package
    (the topmost directory of an ``__init__.py`` chain); else the file's own directory."""
    d = os.path.dirname(os.path.abspath(path))
    probe = d
    while True:
        if os.path.basename(probe) in ("site-packages", "dist-packages"):
            break                        # an installed package: its root is the package's parent
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        up = os.path.dirname(probe)
        if up == probe:
            break
        probe = up
    top = d
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    return top


def unified(path: str, old: str, new: str, root: str | None = None) -> str:
    """``git``-style unified diff of one file (``a/REL`` -> ``b/REL``), or ``""`` when nothing changes."""
    if old == new:
        return ""
    root = root or root_of(path)
    rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{rel}", f"b/{rel}", n=3)
    out = []
    for ln in lines:
        out.append(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n")
    return f"diff --git a/{rel} b/{rel}\n" + "".join(out)
