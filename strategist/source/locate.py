"""Where each advised anchor goes in the model's source.

For every chosen anchor the operator's primitive was created by ``self.<instance> = ...`` in some Cell
class (``Op.source`` gives ``file:line``, found along the class's MRO). The strategy goes there when
every instance of that class that runs this primitive gets the same advised strategy; when they
disagree (a ``Linear`` used column- and row-parallel, or anchored in one place only) each instance is
configured from its owner instead, right after the owner creates it
(``self.linear_fc2.matmul.shard(...)``), and the disagreement is reported.

Strategies are rendered with the class's own parallel-config variables (``dp``, ``tp``, ``cp``, ``ep``
and their MindFormers spellings) when the values of those variables are known, literals otherwise,
and in ``Layout`` form where the tuple form is not equivalent (:func:`strategist.advice.choice.tuple_equivalent`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..advice.choice import tuple_equivalent
from ..report.render import layout_axes, layout_text, strategy_text

# a class's parallel-config variable name -> the mesh axis it stands for
AXIS_VARS = {"dp": "dp", "data_parallel": "dp", "data_parallel_size": "dp",
             "tp": "tp", "mp": "tp", "model_parallel": "tp", "tensor_model_parallel_size": "tp",
             "cp": "cp", "context_parallel": "cp", "context_parallel_size": "cp",
             "ep": "ep", "expert_parallel": "ep", "expert_model_parallel_size": "ep"}


@dataclass
class Strategy:
    """One advised strategy, as the shard() call needs it."""

    op: str
    strategy: tuple                      # the tuple form
    tuple_ok: bool                       # tuple form puts the same data on the same devices
    layout: str | None                   # ``(layout("dp", "None"), ...)`` over the mesh's axis names
    axes: tuple                          # per input, per dim: the mesh axis names splitting it
    rule: str = ""
    needed: str = ""
    why: str = ""

    @property
    def key(self):
        return (self.strategy, self.tuple_ok, self.layout)


@dataclass
class Site:
    """Where one primitive is created: ``self.<instance> = ...`` at ``file:line``."""

    file: str
    line: int
    instance: str
    cell_class: str                      # the class of the Cell owning the operator at run time


@dataclass
class Placement:
    """One edit to make: a strategy for ``instance`` written in class ``klass`` of ``file``.

    ``via`` is empty for the class that creates the primitive, or the attribute chain from an owner
    class down to the Cell owning the primitive (``linear_fc2``) when instances disagree."""

    file: str
    klass: str | None                    # class name, or None: the class defined around ``line``
    line: int                            # the creation line (class-level) or the owner's line (via)
    instance: str
    strategy: Strategy
    ops: list[str] = field(default_factory=list)
    via: str = ""
    #: with ``via``: the owner's line also runs in Cells without that chain (TransformerLayer's self.mlp is a
    #: MoELayer in MoE layers): the shard() goes under ``if <guard>:``
    guard: str = ""


@dataclass
class Location:
    placements: list[Placement]
    disagreements: list[str]             # human-readable, one per class whose instances disagree
    unresolved: list[str]                # anchors that cannot be written into source, with the reason
    prune: list[Site]                    # the model's own shard() calls the advice makes redundant
    kept: list[str] = field(default_factory=list)   # sites whose own shard() already sets the advice
    overridden: list[str] = field(default_factory=list)     # free instances given the plan's strategy


def strategy_of(advice, name: str) -> Strategy:
    """The advised strategy of anchor ``name`` in every form the source may need."""
    ch = advice.plan.choices[name]
    mesh = advice.mesh
    anchor = advice.anchors[name]
    axes = tuple(lay.axes() for lay in anchor.layouts) if anchor.layouts is not None else \
        (layout_axes(ch.inputs, mesh) or ())
    c = next((c for c in advice.chosen if c.op == name), None)
    return Strategy(name, tuple(tuple(s) for s in ch.strategy), tuple_equivalent(ch, mesh),
                    layout_text(ch.inputs, mesh), axes, c.rule if c else "", c.needed if c else "",
                    c.why if c else "")


def _plan_strategy(advice, name: str) -> Strategy:
    """The plan's strategy of ``name`` (an operator the advice leaves to propagation) as a shard() needs it."""
    ch = advice.plan.choices[name]
    return Strategy(name, tuple(tuple(s) for s in ch.strategy), tuple_equivalent(ch, advice.mesh),
                    layout_text(ch.inputs, advice.mesh), layout_axes(ch.inputs, advice.mesh) or (),
                    why="the plan's own strategy, over the class's shard()")


def installed(path: str) -> bool:
    """``path`` is inside an installed package (``site-packages``/``dist-packages``: MindSpore's ``nn`` layers,
    mindone, ...), which strategist never edits: its operators are configured where the user's code owns them."""
    parts = os.path.realpath(path).split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def site_of(op) -> Site | None:
    if not op.source:
        return None
    file, _, line = op.source.rpartition(":")
    if not file or not line.isdigit() or not os.path.isfile(file):
        return None
    return Site(os.path.abspath(file), int(line), op.instance_name, op.cell_class)


def _carries(op, wanted: Strategy | None, current: dict, plan) -> bool:
    """Does the model's own code already give ``op`` what the advice wants? An anchored operator: its
    current strategy is the advised one. An operator the advice leaves to propagation: nothing configures
    it, or what does equals the strategy propagation gives it (a harmless, redundant anchor)."""
    cur = current.get(op.name)
    if wanted is None:
        return cur is None or cur == plan.choices[op.name].strategy
    return cur is not None and wanted.tuple_ok and cur == wanted.strategy


def locate(advice, prune: bool = False, current: dict | None = None) -> Location:
    """Placements for every chosen anchor of ``advice`` (and the redundant shard() calls with ``prune``).

    ``current``: operator -> the tuple strategy the model's own code sets on it at this mesh (for a
    MindFormers model, what its target method sets: :func:`strategist.frontend.mindformers.expert_strategies`).
    A site whose every instance already carries the advice is left alone (``Location.kept``), and an
    instance its class's own call already configures as advised needs no line from its owner."""
    # size: every way a primitive can be assigned in a Cell's source, each a few lines over one AST walk
    g = advice.graph
    current = current or {}
    kept: list[str] = []
    overridden: list[str] = []
    src = _Sources(g)
    anchored = {c.op: strategy_of(advice, c.op) for c in advice.chosen}
    # every operator created at the same source site as an anchor: the class's other instances
    by_site: dict[tuple, list] = {}
    # and every other site where the model's own code sets a strategy the plan does not have (MindFormers'
    # rotary embedding of MLA's one-head k_pe, set with tp on the heads): left there, it would steer the
    # applied package's propagation away from the plan (or be refused by MindSpore), so the plan's strategy
    # goes there too, as for a free instance of an anchored site
    conflicts: dict[tuple, str] = {}
    for op in g:
        s = site_of(op)
        if s is not None:
            by_site.setdefault((s.file, s.line, s.instance), []).append(op)
            if op.name in current and op.name not in anchored and op.held and op.name in advice.plan.choices \
                    and not _carries(op, None, current, advice.plan):
                conflicts[(s.file, s.line, s.instance)] = op.name
    placements: list[Placement] = []
    disagreements: list[str] = []
    unresolved: list[str] = []
    done: set[tuple] = set()
    visits = [(c.op, None) for c in advice.chosen] + [(name, key) for key, name in sorted(conflicts.items())]
    for name, extra in visits:
        op = g.op(name)
        s = site_of(op)
        if s is None:
            unresolved.append(f"{name}: no source line for its primitive (created outside a Cell's __init__?)")
            continue
        if not op.held:
            # a functional or tensor-method call: its Cell holds no primitive attribute to call shard() on
            unresolved.append(f"{name}: a functional call at {_short(s.file)}:{s.line}, not a primitive its Cell "
                              f"holds; configure it by hand (e.g. hold the primitive as an attribute, or shard "
                              f"the calling Cell) with {strategy_text(anchored[name].strategy)}")
            continue
        key = (s.file, s.line, s.instance)
        if key in done:
            continue
        done.add(key)
        users = by_site[key]
        wanted = {u.name: anchored.get(u.name) for u in users}
        if g.mf_options is None and installed(s.file):
            # an installed package's class (nn.Embedding's gather): each anchored instance from its owner in the
            # user's code, never the package's file
            pending = [(u, wanted[u.name]) for u in users if wanted[u.name] is not None]
            unresolved += _place_from_owners(advice, src, s, users, wanted, pending, placements)
            continue
        if extra is not None:
            mine = {u.name: _plan_strategy(advice, u.name) for u in users}
            if len({m.key for m in mine.values()}) == 1:
                # one strategy for every instance: the class's own call takes the plan's
                overridden += [f"{u.name}: {op.cell_class}'s own shard() of {s.instance} sets "
                               f"{strategy_text(current[u.name])}, the plan {strategy_text(mine[u.name].strategy)}"
                               for u in users if u.name in current and not _carries(u, None, current, advice.plan)]
                placements.append(Placement(s.file, None, s.line, s.instance, mine[users[0].name],
                                            [u.name for u in users]))
                continue
        if current and all(_carries(u, wanted[u.name], current, advice.plan) for u in users):
            n = sum(v is not None for v in wanted.values())
            kept.append(f"{op.cell_class}.{s.instance} ({_short(s.file)}:{s.line}): the model's own shard() "
                        f"already sets {strategy_text(anchored[name].strategy)} on the {n} anchored of its "
                        f"{len(users)} instances")
            continue
        kinds = {None if v is None else v.key for v in wanted.values()}
        one = next((v for v in wanted.values() if v is not None), None)
        if one is not None and len(kinds - {None}) == 1 and all(
                wanted[u.name] is not None or (_plan_strategy(advice, u.name).key == one.key
                                               and current.get(u.name) in (None, one.strategy)) for u in users):
            # the instances (or calls of one primitive) the advice leaves to propagation get the advised
            # strategy (tuple, or Layout: qwen3_moe's two residual adds of one primitive, sequence by tp outside
            # the batch by dp) there anyway: one shard() for them all keeps the plan
            kinds = {one.key}
        if len(kinds) == 1 and one is not None:
            placements.append(Placement(s.file, None, s.line, s.instance, anchored[name], [u.name for u in users]))
            continue
        if extra is None:
            # instances disagree: configure each anchored one from its owner
            parts = [f"{u.cell_path or '(root)'}: " + (strategy_text(wanted[u.name].strategy)
                                                       if wanted[u.name] else "not anchored") for u in users]
            desc = ", ".join(parts[:8]) + (f", and {len(parts) - 8} more" if len(parts) > 8 else "")
            disagreements.append(f"{op.cell_class}.{s.instance} ({_short(s.file)}:{s.line}) is used by "
                                 f"{len(users)} instances that disagree — {desc}; each anchored instance is "
                                 f"configured where its owner creates it")
        pending: list[tuple] = []               # (instance, strategy) needing a line from an owner
        for u in users:
            st = wanted[u.name]
            if _carries(u, st, current, advice.plan) if current else st is None:
                continue        # left to propagation, or its class's own shard() already sets the advice
            if st is None:
                # the class's own shard() sets it otherwise than propagation would: overridden from its owner
                # with the plan's strategy (an anchor equal to the plan keeps the plan)
                st = _plan_strategy(advice, u.name)
                overridden.append(f"{u.name}: {op.cell_class}'s own shard() of {s.instance} sets "
                                  f"{strategy_text(current[u.name])}, the plan {strategy_text(st.strategy)}")
            pending.append((u, st))

        unresolved += _place_from_owners(advice, src, s, users, wanted, pending, placements)
    pruned = _pruned(advice, by_site, placements) if prune else []
    return Location(placements, disagreements, unresolved, pruned, kept, overridden)


def _place_from_owners(advice, src: "_Sources", s, users, wanted: dict, pending: list, placements: list) -> list[str]:
    """Configure each ``pending`` instance (with its strategy) from an owner: the nearest first; a line there
    configures every instance that owner's class creates at that line, so where those need different strategies,
    the owner's owner (MindFormers' MLP serves a dense layer's MLP and the MoE's shared experts: the MoE layer
    configures its own shared experts). Appends to ``placements``; returns why each instance left was not placed."""
    g = advice.graph

    def final(n):       # the strategy instance n has in the plan
        return wanted[n].strategy if wanted[n] is not None else advice.plan.choices[n].strategy
    why: dict[str, str] = {}
    for up in range(4):
        if not pending:
            break
        keys = {u.name: _owner_key(g, u, src, up, users) for u in users}     # (key, guard or why not)
        sharing: dict[tuple, list] = {}
        for u in users:
            if keys[u.name][0] is not None:
                sharing.setdefault(keys[u.name][0], []).append(u.name)
        per_owner: dict[tuple, list] = {}
        guards = {}
        for u, st in pending:
            key, msg = keys[u.name]
            if key is None:
                why.setdefault(u.name, msg)
                continue
            guards[key] = msg           # with a key: the guard its line needs, if any
            per_owner.setdefault(key, []).append((u, st))
        left = []
        for key, items in sorted(per_owner.items(), key=lambda kv: kv[0]):
            file, line, chain = key
            named = {u.name for u, _ in items}
            clash = [(u.name, st.strategy) for u, st in items] + \
                    [(n, final(n)) for n in sharing[key] if n not in named and final(n) != items[0][1].strategy]
            if len({st.key for _, st in items}) > 1 or len(clash) > len(items):
                why.update({u.name: f"instances created at the same line {_short(file)}:{line} (repeated layers, "
                                    f"or one class's several instances) need different strategies: "
                                    + "; ".join(f"{n} {strategy_text(t)}" for n, t in clash) for u, _ in items})
                left += items
                continue
            placements.append(Placement(file, None, line, s.instance, items[0][1], sorted(named), via=chain,
                                        guard=guards.get(key, "")))
        pending = left + [(u, st) for u, st in pending if keys[u.name][0] is None]
    return [f"{u.name}: {why.get(u.name, 'no owner line configures it alone')}" for u, _ in pending]


def _pruned(advice, by_site: dict, placements: list) -> list[Site]:
    """The sites of the model's own redundant shard() calls that can go: only where every instance created there
    is redundant (the class may be shared) and no placement writes there."""
    g = advice.graph
    pruned: list[Site] = []
    status_of = {name: status for name, status, _ in advice.existing}
    for name, status, _ in advice.existing:
        if status == "redundant":
            s = site_of(g.op(name))
            # only when every instance created there is redundant (the class may be shared)
            if s is not None and all(status_of.get(u.name) == "redundant" for u in by_site[(s.file, s.line, s.instance)]
                                     if u.configured) and s not in pruned and all((s.file, s.line, s.instance) != (p.file, p.line, p.instance)
                                     for p in placements if not p.via):
                pruned.append(s)
    return pruned


def _owner_key(g, u, src: "_Sources", up: int = 0, users=()) -> tuple[tuple | None, str]:
    """(file, line, attribute chain) where ``u``'s owner (``up`` levels higher: its owner's owner, ...)
    creates the Cell on the way to it, or (None, why not)."""
    parts = u.cell_path.split(".") if u.cell_path else []
    k = len(parts)
    while k > 0 and parts[k - 1].isdigit():
        k -= 1
    k -= up
    if k <= 0:
        return None, "its Cell has no named owner attribute to configure it from"
    owner_path = ".".join(parts[:k - 1])
    if any(p.isdigit() for p in parts[k - 1:]):
        return None, f"owned through a CellList index ({u.cell_path}); configure by hand"
    site = src.site(g.cells.get(owner_path), parts[k - 1])
    if site is None:
        return None, f"cannot find where {owner_path or '(root)'} creates self.{parts[k - 1]}"
    if g.mf_options is None and installed(site[0]):
        return None, (f"created by {g.cells.get(owner_path) or '(root)'} in an installed package "
                      f"({_short(site[0])}:{site[1]})")
    chain = ".".join(parts[k - 1:])
    # the line runs in every Cell whose class creates that attribute there: each must hold the chain
    first = parts[k - 1]
    ours = {(x.cell_path, x.instance_name) for x in users}
    missing = [o for o, c in sorted(g.cells.items()) if f"{o}.{first}".lstrip(".") in g.cells
               and (f"{o}.{chain}".lstrip("."), u.instance_name) not in ours and src.site(c, first) == site]
    other = next((o for o in missing if (f"{o}.{chain}".lstrip("."), u.instance_name) in src.held), None)
    if other is not None:
        # there the chain holds another primitive of that name (a guard would configure it too)
        return None, (f"a line at {_short(site[0])}:{site[1]} would also configure {other or '(root)'}'s own "
                      f"self.{chain}.{u.instance_name}, another primitive")
    if missing:
        # the line also runs where self.<chain>.<instance> is not there: guarded by the attributes on the way
        links = chain.split(".") + [u.instance_name]
        return site + (chain,), " and ".join(f"hasattr(self.{'.'.join(links[:i])}, {links[i]!r})"
                                             for i in range(1, len(links)))
    return site + (chain,), ""


class _Sources:
    """The model's source files parsed once: where a Cell class (or a base of it) creates an attribute."""

    def __init__(self, g):
        import ast
        self.ast = ast
        self.g = g
        files = [op.source.rpartition(":")[0] for op in g if op.source]
        model_file = (g.model or "").rpartition(":")[0]
        files += [model_file] if model_file else []
        self.seen: list[str] = []
        self.classes: dict[str, list] = {}      # class name -> [(file, ClassDef)]
        for f in files:
            f = os.path.abspath(f)
            if f in self.seen or not os.path.isfile(f):
                continue
            self.seen.append(f)
            self._parse(f)
        self.dirs = sorted({os.path.dirname(f) for f in self.seen})
        self.scanned: set[str] = set()
        self.sites: dict[tuple, tuple | None] = {}
        self.held = {(op.cell_path, op.instance_name) for op in g}
        # a class's own file first: the file where its operators are created
        self.home: dict[str, set] = {}
        for op in g:
            if op.source:
                self.home.setdefault(op.cell_class, set()).add(os.path.abspath(op.source.rpartition(":")[0]))

    def _parse(self, f, text=None):
        try:
            tree = self.ast.parse(text if text is not None else open(f, encoding="utf-8").read())
        except (OSError, SyntaxError, UnicodeDecodeError):
            return
        for node in self.ast.walk(tree):
            if isinstance(node, self.ast.ClassDef):
                self.classes.setdefault(node.name, []).append((f, node))

    def defined(self, name: str) -> list:
        # a class no operator's source names (MindFormers' SharedExpertMLP creates no primitive of its own):
        # looked for beside the files searched
        if name not in self.classes and name not in self.scanned:
            self.scanned.add(name)
            for d in self.dirs:
                for fn in sorted(os.listdir(d)):
                    f = os.path.join(d, fn)
                    if not fn.endswith(".py") or f in self.seen:
                        continue
                    try:
                        text = open(f, encoding="utf-8").read()
                    except (OSError, UnicodeDecodeError):
                        continue
                    if f"class {name}(" in text or f"class {name}:" in text:
                        self.seen.append(f)
                        self._parse(f, text)
        home = self.home.get(name, set())
        return sorted(self.classes.get(name, []), key=lambda fc: fc[0] not in home)

    def site(self, klass: str | None, attr: str) -> tuple[str, int] | None:
        """``(file, line)`` of ``self.<attr> = ...`` in class ``klass`` or, failing that, its bases
        (MindFormers' MLPInterleaved creates its linears in MLP.__init__)."""
        if klass is None:
            return None
        key = (klass, attr)
        if key not in self.sites:
            ast = self.ast
            found = None
            todo, done = [klass], set()
            while todo and found is None:
                name = todo.pop(0)
                if name in done:
                    continue
                done.add(name)
                for f, node in self.defined(name):
                    found = next(((f, sub.lineno) for sub in ast.walk(node) if isinstance(sub, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                        and t.value.id == "self" for t in sub.targets)), None)
                    if found is not None:
                        break
                    todo += [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                             if isinstance(b, (ast.Name, ast.Attribute))]
            self.sites[key] = found
        return self.sites[key]


def _short(path: str) -> str:
    try:
        r = os.path.relpath(path)
    except ValueError:
        return path
    return path if r.startswith("..") else r
