"""Advice into source: shard diffs to review, ``--apply`` in place, or MindSpore's strategy file.

>>> from strategist.source import source_changes           # doctest: +SKIP
>>> ch = source_changes(advice, prune=False)                # doctest: +SKIP
>>> print(ch.diff()); ch.apply()                            # doctest: +SKIP
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from .apply import ApplyError, check, digest, write_atomic, write_new
from .diff import root_of, unified
from ..errors import SourceEditError
from .edit import edit_source
from .instances import FILE as FUNCTION_FILE
from .instances import apply_function
from .locate import installed, locate, site_of
from .strategy_file import strategy_file, write_strategy_file

__all__ = ["source_changes", "SourceChanges", "FileChange", "ApplyError", "SourceEditError",
           "strategy_file", "write_strategy_file", "installed_anchors"]


@dataclass
class FileChange:
    path: str
    root: str
    old: str
    new: str
    old_hash: str
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        return unified(self.path, self.old, self.new, self.root)


@dataclass
class SourceChanges:
    files: list[FileChange]
    summary: list[str]            # review lines: per class, each anchor's operator, rule and cost saved
    disagreements: list[str]
    unresolved: list[str]
    kept: list[str] = field(default_factory=list)   # sites already carrying the advice: left as they are
    overridden: list[str] = field(default_factory=list)   # free instances a class's shard() sets otherwise
    #: strategies the model's own target method sets that an operator cannot take: the diff leaves them, and
    #: MindSpore refuses the build in that mode (deepseek3's rotary Mul, shared by q_pe and the one-head k_pe)
    refused: list[str] = field(default_factory=list)
    #: anchors no line of the user's owns (operators created inside installed packages): the text of
    #: ``apply_strategies(model)`` (:mod:`strategist.source.instances`) and the operators it configures
    function: str = ""
    function_ops: list[str] = field(default_factory=list)

    def diff(self) -> str:
        return "".join(f.diff() for f in self.files) + self._function_diff()

    def _function_diff(self) -> str:
        """The new module ``strategist_strategies.py`` (in the working directory) as a ``git apply`` diff."""
        if not self.function:
            return ""
        old = _read(FUNCTION_FILE)
        if old is not None:
            return unified(os.path.abspath(FUNCTION_FILE), old, self.function, os.getcwd())
        body = "".join(f"+{ln}\n" for ln in self.function.splitlines())
        n = len(self.function.splitlines())
        return (f"diff --git a/{FUNCTION_FILE} b/{FUNCTION_FILE}\nnew file mode 100644\n--- /dev/null\n"
                f"+++ b/{FUNCTION_FILE}\n@@ -0,0 +1,{n} @@\n{body}")

    @property
    def changed(self) -> list[FileChange]:
        return [f for f in self.files if f.changed]

    def apply(self) -> list[str]:
        """Write every changed file in place (all checked before any is written). Returns one message per
        file; an :class:`ApplyError` names the first file refused, with nothing written."""
        todo = self.changed
        for f in todo:
            check(f.path, f.old_hash, f.new)
        out = []
        for f in todo:
            backup = write_atomic(f.path, f.new, f.old)
            out.append(f"wrote {f.path} (backup {os.path.basename(backup)})")
        if self.function:
            old = _read(FUNCTION_FILE)
            if old != self.function:
                write_new(FUNCTION_FILE, self.function, old)
                out.append(f"wrote {FUNCTION_FILE}: call apply_strategies(model) after building the model "
                           f"({len(self.function_ops)} operators created inside installed packages)")
        return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except OSError:
        return None


def _analysed_text(path: str) -> str | None:
    """The file's text as the analysis read it (graph extraction reads class sources through linecache)."""
    import linecache
    entry = linecache.cache.get(path)
    if not entry or len(entry) != 4 or entry[1] is None:
        return None
    return "".join(entry[2])


def _is_mindformers(path: str) -> bool:
    return "mindformers" in os.path.abspath(path).split(os.sep)


def _inheriting(path: str, method: str) -> frozenset:
    """Classes of the (imported) module at ``path`` that inherit ``method`` from a base without defining it."""
    import sys
    path = os.path.realpath(path)
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and os.path.realpath(f) == path:
            return frozenset(name for name, cls in vars(mod).items()
                             if isinstance(cls, type) and cls.__module__ == mod.__name__
                             and method not in cls.__dict__ and callable(getattr(cls, method, None)))
    return frozenset()


def current_strategies(advice, target: str | None = None, undefined: list | None = None,
                       refused: list | None = None) -> dict[str, tuple]:
    """Operator -> the tuple strategy the model's own code sets on it at the advice's mesh: the shard() calls
    the graph recorded (a model file), or for a MindFormers model what its ``target`` method sets there (a
    build at that mesh, nothing compiled: :func:`strategist.frontend.mindformers.expert_strategies`).
    ``undefined`` (a list) gets the (class, file) pairs of the model's MindFormers classes that call
    ``sharding_propagation()`` without defining it, ``refused`` (a list) the (operator, note) pairs of the
    strategies its code sets that an operator of the graph cannot take (MindSpore refuses such a build)."""
    g = advice.graph
    opts = g.mf_options
    if opts is None:
        return {op.name: tuple(tuple(r) for r in op.in_strategy) for op in g
                if op.in_strategy is not None and op.in_layout is None}
    from ..frontend.mindformers import expert_strategies
    mode = "semi_auto" if (target or "sharding_propagation") == "shard" else "propagation"
    experts = expert_strategies(g.model, advice.mesh, mode, graph=g, **opts)
    if undefined is not None:
        undefined.extend(experts.undefined)
    if refused is not None:
        refused.extend((name, note) for name, _, note in experts.refused)
    out = {name: a.strategy for name, a in experts.items() if a.strategy is not None}
    # what the code sets on an operator that cannot take it is set all the same (MindSpore refuses it): the
    # plan's strategy goes there (locate), so the applied package is not refused
    set_anyway = {name: a.strategy for name, a, _ in experts.refused if a.strategy is not None}
    out.update({name: st for name, st in set_anyway.items() if name not in out})
    return out


def source_changes(advice, *, prune: bool = False, target: str | None = None) -> SourceChanges:
    """The edits that write ``advice`` into the model's sources (nothing is written here).

    ``target``: for MindFormers classes, the method the strategies go into (``"sharding_propagation"``,
    the default, or ``"shard"``); plain model files get them where the primitive is configured today."""
    g = advice.graph
    if g.mf_legacy:
        # MindFormers' legacy layers configure in __init__ and in shard(parallel_config) methods their owners call
        # only outside sharding-propagation mode: a line there does not run where the advice is meant to
        raise SourceEditError(f"{g.model} is a MindFormers legacy model (use_legacy=True), whose layers configure "
                              f"in shard(parallel_config) methods sharding-propagation mode skips: source diffs are "
                              f"not written for it; use --emit-strategy-file FILE.json (MindSpore's operator-strategy "
                              f"file) or the anchors file of the report")
    undefined: list[tuple[str, str]] = []
    refused: list[tuple[str, str]] = []
    loc = locate(advice, prune=prune, current=current_strategies(advice, target, undefined, refused))
    # MindFormers calls sharding_propagation() on FlashAttention and MoELayer without defining it, so its
    # sharding-propagation mode fails in them (AttributeError): the diff defines it where the advice writes
    # nothing into it, configuring nothing, as MindFormers' mode would if it worked
    define: dict[str, set[str]] = {}
    if (target or "sharding_propagation") == "sharding_propagation":
        for klass, path in undefined:
            define.setdefault(path, set()).add(klass)
    recorded: dict[str, dict] = {}
    for op in g:
        s = site_of(op)
        if s is not None and op.in_strategy is not None:
            recorded.setdefault(s.file, {}).setdefault((s.line, s.instance), op.in_strategy)
    files = sorted({p.file for p in loc.placements} | {s.file for s in loc.prune})
    spelled = {os.path.realpath(f): f for f in files}
    define = {spelled.get(os.path.realpath(f), f): names for f, names in define.items()}
    files = sorted(set(files) | set(define))
    changes = []
    for path in files:
        with open(path, encoding="utf-8", newline="") as fh:
            old = fh.read()
        seen = _analysed_text(path)
        if seen is not None and seen != old.replace("\r\n", "\n").replace("\r", "\n"):
            raise ApplyError(f"{path} changed since the analysis; run advise again (nothing was written)")
        tgt = (target or "sharding_propagation") if _is_mindformers(path) else None
        pls = sorted((p for p in loc.placements if p.file == path), key=lambda p: (p.line, p.via, p.instance))
        new, notes = edit_source(old, pls, [s for s in loc.prune if s.file == path], advice.mesh, target=tgt,
                                 recorded=recorded.get(path, {}), path=path,
                                 inherited=_inheriting(path, tgt) if tgt else frozenset(),
                                 define=frozenset(define.get(path, ())))
        changes.append(FileChange(path, root_of(path), old, new, digest(old), notes))
    summary = []
    for p in sorted(loc.placements, key=lambda p: (p.file, p.line, p.via)):
        for name in p.ops:
            c = next((c for c in advice.chosen if c.op == name), None)
            if c is None:
                continue
            saved = c.needed or "(declared)"
            summary.append(f"{g.op(name).cell_class} [{os.path.basename(p.file)}:{p.line}] {name}: rule {c.rule} "
                           f"({c.template}); {saved}")
    # (a refused strategy the diff replaces with the plan's is not left)
    written = {n for p in loc.placements for n in p.ops}
    left = [note.replace("; skipped", "") for name, note in refused if name not in written]
    # anchors inside installed packages no class of the user's owns: apply_strategies(model)
    inside = [c.op for c in advice.chosen if opts_none(g) and c.op not in written
              and (site_of(g.op(c.op)) is None or installed(site_of(g.op(c.op)).file))]
    unresolved = [u for u in loc.unresolved if u.partition(": ")[0] not in set(inside)]
    function = apply_function(advice, inside) if inside else ""
    return SourceChanges(changes, summary, loc.disagreements, unresolved, loc.kept, loc.overridden, left,
                         function, inside)


def installed_anchors(advice) -> tuple[list[str], dict[str, str]]:
    """For the anchors on operators created inside installed packages, from one search of the user's source:
    (the report's notes -- the user's line that configures each from its owner, and how many
    ``apply_strategies(model)`` takes --, ``{operator: "file:line"}`` of those user's lines, which the report names in
    place of the package's line). MindFormers models: none."""
    g = advice.graph
    if g.mf_options is not None or not advice.chosen:
        return [], {}
    loc = locate(advice)
    from ..report.render import strategy_text
    notes, sites = [], {}
    for p in sorted(loc.placements, key=lambda p: (p.file, p.line)):
        for name in p.ops:
            s = site_of(g.op(name))
            if p.via and s is not None and installed(s.file) and name in advice.anchors:
                sites[name] = f"{_user_path(p.file)}:{p.line}"
                notes.append(f"{name} ({g.op(name).type}) is created inside an installed package "
                             f"({_site_short(s.file)}:{s.line}): configure it in your code at {sites[name]}: "
                             f"self.{p.via}.{p.instance}.shard({strategy_text(p.strategy.strategy)})")
    written = {n for p in loc.placements for n in p.ops}
    inside = [c.op for c in advice.chosen if c.op not in written
              and (site_of(g.op(c.op)) is None or installed(site_of(g.op(c.op)).file))]
    if inside:
        notes.append(f"{len(inside)} advised operator(s) are created inside installed packages and owned by none of "
                     f"your classes: advise --diff/--apply writes apply_strategies(model) into {FUNCTION_FILE}, to "
                     f"call once the model is built")
    return notes, sites


def _user_path(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _site_short(path: str) -> str:
    marker = os.sep + "site-packages" + os.sep
    return path.split(marker, 1)[1] if marker in path else path


def opts_none(g) -> bool:
    """Not a MindFormers model (whose diffs go into MindFormers' own classes)."""
    return g.mf_options is None


def advise_outputs(advice, *, diff: bool = False, diff_out: str | None = None, apply: bool = False,
                   prune: bool = False, target: str | None = None, emit_strategy_file: str | None = None,
                   out=None, err=None) -> bool:
    """``strategist advise``'s source options. Review lines go to ``err``, the diff (``diff``) to ``out``.
    Returns True when it printed the diff (the CLI then leaves out the report)."""
    import sys
    out = out or sys.stdout
    err = err or sys.stderr
    if emit_strategy_file:
        missing = write_strategy_file(advice, emit_strategy_file)
        err.write(f"strategist: wrote {emit_strategy_file} (MindSpore operator-strategy file, every operator of "
                  f"the advised plan)\n")
        for m in missing:
            err.write(f"strategist: not in the strategy file: {m}\n")
    if not (diff or diff_out or apply or prune):
        return False
    ch = source_changes(advice, prune=prune, target=target)
    if not advice.chosen:
        err.write("strategist: the advice configures no operator: no shard() to write\n")
    for line in ch.summary:
        err.write(f"strategist: {line}\n")
    for line in ch.kept:
        err.write(f"strategist: already in the source: {line}\n")
    for line in ch.overridden:
        err.write(f"strategist: configured from its owner as the plan has it: {line}\n")
    for line in ch.disagreements:
        err.write(f"strategist: instances disagree: {line}\n")
    for line in ch.unresolved:
        err.write(f"strategist: not written: {line}\n")
    if ch.function:
        err.write(f"strategist: {len(ch.function_ops)} operator(s) created inside installed packages, which "
                  f"strategist never edits, are configured in apply_strategies(model) ({FUNCTION_FILE}): call it "
                  f"once the model is built\n")
    for line in ch.refused:
        err.write(f"strategist: the model's own strategy, left as it is, which MindSpore refuses in this mode: "
                  f"{line.partition(': ')[2]}\n")
    for f in ch.files:
        for note in f.notes:
            if "removed the redundant" in note:
                err.write(f"strategist: --prune: {note} ({os.path.basename(f.path)})\n")
            elif "which MindFormers calls and the class lacked" in note:
                err.write(f"strategist: {note}: MindFormers' sharding-propagation mode stopped there "
                          f"(AttributeError) ({os.path.basename(f.path)})\n")
    text = ch.diff()
    if diff_out:
        with open(diff_out, "w", encoding="utf-8") as f:
            f.write(text)
        err.write(f"strategist: wrote {diff_out} ({len(ch.changed)} file(s) changed; apply with git apply or "
                  f"patch -p1 in each file's repository root)\n")
    if apply:
        if not ch.changed and not ch.function:
            err.write("strategist: nothing to change: the sources already carry the advice\n")
        for msg in ch.apply():
            err.write(f"strategist: {msg}\n")
    if diff:
        out.write(text)
        return True
    return False
