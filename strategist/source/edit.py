"""libcst edits of one source file: write, replace or remove ``shard()`` strategies, nothing else.

Every change goes through libcst, so formatting and comments outside the edited statements survive
byte for byte. The edits are idempotent: run on their own output they change nothing.
"""
from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from ..errors import SourceEditError
from .locate import Placement, Site
from .cst_match import (
    add_import, add_layout_import, assign_to, assigned_names, call_args, calls_under, chained_shard, imports_layout,
    is_pass, layout_binding, method_named, method_scope, own_call, shard_call_of, syntax_of, uses_method,
    walk_nodes,
)
from .mf_config import config_attrs, config_param, config_values, evaluate, infer_values, mode_gate, self_config_values
from .shard_text import MF_LAYOUT_MODULE, layout_decl, mf_mesh, render
from .wrap import wrap_long_lines


#: the docstring of a method a MindFormers class is called with but lacks (sharding_propagation)
DEFINED_DOC = "Set parallel strategy in sharding-propagation mode: nothing here (MindFormers calls this method)."


class _Plan:
    """What to do in one class body."""

    def __init__(self):
        self.set_args: dict[int, str] = {}          # id of a shard Call node -> new argument text
        self.chain: dict[int, str] = {}             # id of an Assign node -> wrap its value in .shard(args)
        self.unchain: set[int] = set()              # id of an Assign node -> drop its chained .shard()
        self.insert_after: dict[int, list[str]] = {}  # id of a statement -> statements to insert after it
        self.insert_before: dict[int, list[str]] = {}
        self.remove: set[int] = set()               # ids of statements to delete
        self.append_method: dict[str, list[str]] = {}  # (class id, method) handled by caller
        self.needs_layout_import = False
        self.needs_mf_layout_import = False


class _Rewriter(cst.CSTTransformer):
    def __init__(self, plan: _Plan, new_methods: dict[int, list[str]]):
        self.p = plan
        self.new_methods = new_methods

    def leave_Call(self, original, updated):
        item = self.p.set_args.get(id(original))
        if item is None:
            return updated
        text, values, strategy = item
        first = next((a for a in updated.args if a.keyword is None or a.keyword.value == "in_strategy"), None)
        if first is not None and len(updated.args) == 1:
            old = cst.Module([]).code_for_node(first.value)
            if "".join(old.split()) == "".join(text.split()) or \
                    (strategy is not None and evaluate(first.value, values) == strategy):
                return updated          # already the advised strategy (perhaps in the user's own words)
        return updated.with_changes(args=call_args(text))

    def leave_Assign(self, original, updated):
        text = self.p.chain.get(id(original))
        if text is not None:
            return updated.with_changes(value=cst.Call(
                func=cst.Attribute(value=updated.value, attr=cst.Name("shard")), args=call_args(text)))
        if id(original) in self.p.unchain:
            inner = chained_shard(updated.value)
            if inner is not None:
                return updated.with_changes(value=inner.func.value)
        return updated

    def _fix_body(self, original_body, updated_body):
        out = []
        for o, u in zip(original_body, updated_body):
            for s in self.p.insert_before.get(id(o), []):
                out.append(cst.parse_statement(s))
            if id(o) not in self.p.remove:
                out.append(u)
            for s in self.p.insert_after.get(id(o), []):
                out.append(cst.parse_statement(s))
        return out

    def leave_IndentedBlock(self, original, updated):
        body = self._fix_body(original.body, updated.body)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated.with_changes(body=body)

    def leave_ClassDef(self, original, updated):
        extra = self.new_methods.get(id(original))
        if not extra:
            return updated
        body = list(updated.body.body)
        for m in extra:
            meth = cst.parse_statement(m)
            if body:        # a blank line between methods
                meth = meth.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
            body.append(meth)
        return updated.with_changes(body=updated.body.with_changes(body=body))


def edit_source(code: str, placements: list[Placement], prune: list[Site], mesh, *,
                target: str | None = None, recorded: dict[tuple[int, str], tuple] | None = None,
                path: str = "<source>", inherited: frozenset = frozenset(),
                define: frozenset = frozenset()) -> tuple[str, list[str]]:
    """``code`` with every placement written (and every pruned shard() removed); notes on what was done.

    ``target``: ``"sharding_propagation"`` or ``"shard"``: write into that method of the class (created if
    missing) instead of where the primitive is created. ``recorded``: (creation line, instance) -> the
    strategy the graph recorded for the model's own shard() of that primitive, to learn the values of
    the class's parallel-config variables. ``inherited``: names of this file's classes that inherit ``target``
    from a base without defining it (the lines then go after the class's own call of it). ``define``: names of
    this file's classes that call ``target`` without defining it (MindFormers' FlashAttention): each gets the
    method, configuring nothing where no placement writes into it."""
    ed = _Editor(code, mesh, target, recorded, path, inherited, define)
    for pl in placements:
        ed.place(pl)
    return ed.finish(code, prune)


class _Editor:
    """One file's edit (:func:`edit_source`): the parsed module with its positions and parents, the edits planned
    on it, and the notes."""

    def __init__(self, code: str, mesh, target, recorded, path, inherited, define):
        self.mesh, self.target, self.path, self.inherited, self.define = mesh, target, path, inherited, define
        try:
            self.module = module = cst.parse_module(code)
        except cst.ParserSyntaxError as err:
            raise SourceEditError(f"{path} does not parse: {err.message} (line {err.raw_line})") from None
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.pos = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.classes = [n for n in walk_nodes(module) if isinstance(n, cst.ClassDef)]
        self.plan = _Plan()
        # MindFormers' own ``layout`` (device matrix (dp, cp, tp) from the run's config) writes a Layout that holds
        # at any mesh of those axes, as the experts' own shard() methods do; where this file's ``layout`` is another
        # name, or the mesh is not laid out as MindFormers lays it, the Layout is declared over the mesh
        self.binds = layout_binding(module)
        self.mf_layout = bool(target) and self.binds != "other" and mf_mesh(mesh)
        self.new_methods: dict[int, list[str]] = {}
        self.gated: dict[int, tuple] = {}        # mode-test statement -> (it, negated test, pre-lines, shard() lines)
        self.notes: list[str] = []
        self.recorded = recorded or {}

    def class_at(self, line) -> cst.ClassDef | None:
        best = None
        for c in self.classes:
            r = self.pos[c]
            if r.start.line <= line <= r.end.line and (best is None or self.pos[best].start.line < r.start.line):
                best = c
        return best

    def top_stmt(self, node, fn):
        """The statement of ``fn``'s body containing ``node``."""
        while node is not None and self.parents.get(node) is not fn.body:
            node = self.parents.get(node)
        return node

    def enclosing_fn(self, node):
        while node is not None and not isinstance(node, cst.FunctionDef):
            node = self.parents.get(node)
        return node

    def scope_values(self, klass, fn, before, tgt=None, name=None):
        """The parallel-config names visible at the edit, with their values; a MindFormers method (``tgt``)
        whose ``config`` is the run's config (``name``: the method, when ``fn`` is still to be written) also
        offers the config's own attributes."""
        rec = {inst: s for (ln, inst), s in self.recorded.items() if self.pos[klass].start.line <= ln <= self.pos[klass].end.line}
        values = infer_values(klass, rec) if fn is not None else {}
        if tgt and fn is not None:
            values.update(config_values(fn, self.mesh))
        visible = method_scope(fn, before) if fn is not None else set()
        out = {k: v for k, v in values.items() if k in visible}
        if self.target and (fn is not None or name) and config_param(klass, fn, name or fn.name.value) \
                and "config" not in (assigned_names(fn, before) if fn is not None else set()):
            out.update(config_attrs(self.mesh))
        if self.target and (fn is None or fn.name.value != "__init__"):
            out.update(self_config_values(klass, self.mesh, name or fn.name.value))    # set by __init__ before any other method runs
        return out

    def rend(self, pl, sc):
        if self.mf_layout and not pl.strategy.tuple_ok:
            self.plan.needs_mf_layout_import = True
        return render(pl, self.mesh, sc, self.mf_layout)

    def add_insert(self, table, stmt, lines):
        cur = table.setdefault(id(stmt), [])
        for ln in lines:
            if ln not in cur:
                cur.append(ln)

    def update(self, stmts, name, text, sc, lay, pl):
        # the model's own shard() calls of ``name``: their arguments become the advice (kept if already so)
        for x in stmts:
            self.plan.set_args[id(shard_call_of(x, name))] = (text, sc, None if lay else pl.strategy.strategy)

    def add_to_method(self, klass, head: str, lines):
        # the new method ``head`` of the class, one line per strategy (several instances merged into it)
        cur = self.new_methods.setdefault(id(klass), [])
        body = [f"    {ln}\n" for ln in lines]
        if not cur:
            cur.append(head + "".join(body))
            return
        first, *rest = cur[0].splitlines(keepends=True)
        rest += [b for b in body if b not in rest]
        cur[0] = first + "".join(rest)

    @staticmethod
    def has_stmt(body, text):
        # by syntax, not layout: a line the diff wrapped (wrap_long_lines) is the same statement
        want = ast.dump(ast.parse(text))
        return any(syntax_of(s) == want for s in body)

    def place(self, pl: Placement) -> None:
        """Write one placement: from its owner (``pl.via``), into the target method, after a mode test, at the
        class's own shard() calls, or where the primitive is created."""
        klass = self.class_at(pl.line)
        if klass is None:
            raise SourceEditError(f"{self.path}:{pl.line}: no class around the line that creates "
                                  f"self.{pl.via or pl.instance}")
        kname = klass.name.value
        if pl.via:
            return self._place_via(pl, klass, kname)
        # class-level: where the class configures this primitive today. A MindFormers class that neither
        # defines nor calls the target method (CrossEntropyLoss configures in __init__ in every mode): a new
        # method would never run, so the strategy goes where the class configures the primitive
        tgt = self.target if self.target and uses_method(klass, self.target) else None
        calls = [n for n in walk_nodes(klass) if isinstance(n, cst.SimpleStatementLine)
                 and shard_call_of(n, pl.instance) is not None]
        if tgt:   # MindFormers: only the target method's own calls count
            calls = [n for n in calls if getattr(self.enclosing_fn(n), "name", None) is not None
                     and self.enclosing_fn(n).name.value == tgt]
        assign = next((n for n in walk_nodes(klass) if isinstance(n, cst.SimpleStatementLine)
                       and self.pos[n].start.line == pl.line and assign_to(n, pl.instance)), None)
        if tgt and not calls:
            return self._place_in_target(pl, klass, kname, tgt)
        gate = mode_gate(klass, self.enclosing_fn(calls[-1])) if (self.target and not tgt and calls) else None
        if gate is not None:
            return self._place_gated(pl, klass, kname, gate)
        if calls:
            return self._place_at_calls(pl, klass, kname, calls, tgt)
        if assign is None:
            raise SourceEditError(f"{self.path}:{pl.line}: expected self.{pl.instance} = ... in class {kname}")
        return self._place_at_assign(pl, klass, kname, assign, tgt)

    def _place_via(self, pl, klass, kname) -> None:
        """One instance configured from its owner, right after the owner creates it."""
        # configure one instance from its owner, right after the owner creates it
        first = pl.via.split(".")[0]
        stmt = next((n for n in walk_nodes(klass) if isinstance(n, cst.SimpleStatementLine)
                     and self.pos[n].start.line == pl.line and assign_to(n, first)), None)
        if stmt is None:
            raise SourceEditError(f"{self.path}:{pl.line}: expected self.{first} = ... in class {kname}")
        fn = self.enclosing_fn(stmt)
        sc = self.scope_values(klass, fn, stmt, self.target)
        text, lay = self.rend(pl, sc)
        target_name = f"{pl.via}.{pl.instance}"
        body = self.parents[stmt].body
        if pl.guard:
            # the owner's line also runs where the chain is not there: under the guard (an earlier
            # run's guarded block is updated, not repeated)
            existing = calls_under(body, pl.guard, target_name)
        else:
            existing = [s for s in body if shard_call_of(s, target_name) is not None]
        if existing:
            self.update(existing, target_name, text, sc, lay, pl)
        else:
            call = f"self.{target_name}.shard({text})"
            lines = ([layout_decl(self.mesh)] if lay and not self.has_stmt(body, layout_decl(self.mesh)) else []) + \
                    [f"if {pl.guard}:\n    {call}\n" if pl.guard else call]
            self.add_insert(self.plan.insert_after, stmt, lines)
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{target_name}.shard({text})")

    def _place_in_target(self, pl, klass, kname, tgt) -> None:
        """MindFormers: into the target method, where it does not configure the primitive yet (created where missing)."""
        fn = method_named(klass, tgt)
        inherits = fn is None and kname in self.inherited
        text, lay = self.rend(pl, {} if inherits else self.scope_values(klass, fn, None, tgt, tgt))
        lines = ([layout_decl(self.mesh)] if lay else []) + [f"self.{pl.instance}.shard({text})"]
        call_site = own_call(klass, tgt) if fn is None and kname in self.inherited else None
        if call_site is not None:
            # the method comes from a base (MultiLatentAttention's): a new one would override its strategies,
            # and the base's __init__ calls it before this class creates its primitives; the lines go right
            # after this class's own call of it instead (an earlier run's lines there are updated)
            block = self.parents[call_site].body
            after = list(block[list(block).index(call_site) + 1:])
            have = [x for x in after if shard_call_of(x, pl.instance) is not None]
            if have:
                self.update(have, pl.instance, text, {}, lay, pl)
                lines = [ln for ln in lines if ln == layout_decl(self.mesh) and not self.has_stmt(block, ln)]
            else:
                lines = [ln for ln in lines if not (ln == layout_decl(self.mesh) and self.has_stmt(block, ln))]
            if lines:
                self.add_insert(self.plan.insert_after, call_site, lines)
        elif fn is None and kname in self.inherited:
            # inherited and only a base calls it: an override that keeps the base's strategies
            self.add_to_method(klass, f"def {tgt}(self, *args, **kwargs):\n    super().{tgt}(*args, **kwargs)\n",
                          lines)
        elif fn is None:
            # MindFormers calls it with a config, or with none (MLASelfAttention)
            self.add_to_method(klass, f"def {tgt}(self, config=None):\n", lines)
        else:
            last = fn.body.body[-1]
            lines = [ln for ln in lines if not self.has_stmt(fn.body.body, ln)]
            if lines:
                self.add_insert(self.plan.insert_after, last, lines)
            if is_pass(last) and lines:       # a placeholder ``pass`` goes
                self.plan.remove.add(id(last))
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}.{tgt}: self.{pl.instance}.shard({text})")

    def _place_gated(self, pl, klass, kname, gate) -> None:
        """After the mode test under which the class configures the primitive, under its negation."""
        # the class configures this primitive in a method its __init__ calls under a mode test alone
        # (TopKRouter: shard() in semi_auto_parallel): there the line would never run in the target's mode.
        # It goes after that test, under its negation (an earlier run's block is updated, not repeated)
        stmt, test = gate
        init = self.enclosing_fn(stmt)
        sc = self.scope_values(klass, init, stmt, None)
        text, lay = self.rend(pl, sc)
        block = self.parents[stmt].body
        cond = f"not ({test})"
        have = calls_under(block, cond, pl.instance)
        call = f"self.{pl.instance}.shard({text})"
        if have:
            self.update(have, pl.instance, text, sc, lay, pl)
        else:
            pre = [layout_decl(self.mesh)] if lay and not self.has_stmt(block, layout_decl(self.mesh)) else []
            self.gated.setdefault(id(stmt), (stmt, cond, pre, []))[3].append(call)
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{pl.instance}.shard({text}) (under `if {cond}:` in __init__)")

    def _place_at_calls(self, pl, klass, kname, calls, tgt) -> None:
        """Where the class configures the primitive today: its shard() calls updated, or a call after conditional ones."""
        fn = self.enclosing_fn(calls[-1])
        direct = [c for c in calls if self.parents.get(c) is (fn.body if fn else None)]
        anchor_stmt = direct[0] if direct else self.top_stmt(calls[-1], fn)
        sc = self.scope_values(klass, fn, anchor_stmt, tgt)
        text, lay = self.rend(pl, sc)
        body = fn.body.body
        if direct:
            self.update(direct, pl.instance, text, sc, lay, pl)
            if lay and not self.has_stmt(body, layout_decl(self.mesh)):
                self.add_insert(self.plan.insert_before, direct[0], [layout_decl(self.mesh)])
            where = "its shard() call"
        else:
            # only conditional shard() calls: the advised one runs after them, whatever branch ran
            lines = ([layout_decl(self.mesh)] if lay and not self.has_stmt(body, layout_decl(self.mesh)) else []) + \
                    [f"self.{pl.instance}.shard({text})"]
            lines = [ln for ln in lines if not self.has_stmt(body, ln)]
            if lines:
                self.add_insert(self.plan.insert_after, anchor_stmt, lines)
            where = "after its conditional shard() calls"
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{pl.instance}.shard({text}) ({where})")

    def _place_at_assign(self, pl, klass, kname, assign, tgt) -> None:
        """Where the primitive is created: a chained shard(), or a call after the assignment."""
        fn = self.enclosing_fn(assign)
        sc = self.scope_values(klass, fn, assign, tgt)
        text, lay = self.rend(pl, sc)
        a = assign.body[0]
        chained = chained_shard(a.value)
        if lay:
            if chained is not None:
                self.plan.unchain.add(id(a))
            body = self.parents[assign].body
            lines = [ln for ln in (layout_decl(self.mesh), f"self.{pl.instance}.shard({text})") if not self.has_stmt(body, ln)]
            if lines:
                self.add_insert(self.plan.insert_after, assign, lines)
        elif chained is not None:
            self.plan.set_args[id(chained)] = (text, sc, None if lay else pl.strategy.strategy)
        elif isinstance(a.value, cst.Call):
            self.plan.chain[id(a)] = text
        else:
            self.add_insert(self.plan.insert_after, assign, [f"self.{pl.instance}.shard({text})"])
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{pl.instance} = ....shard({text})")

    def finish(self, code: str, prune: list[Site]) -> tuple[str, list[str]]:
        """The methods to define, the gated blocks, the pruned shard() calls; the edited code and the notes."""
        for klass in self.classes:
            if self.target and klass.name.value in self.define and id(klass) not in self.new_methods and method_named(klass, self.target) is None:
                self.new_methods[id(klass)] = [f'def {self.target}(self, config=None):\n    """{DEFINED_DOC}"""\n']
                self.notes.append(f"{klass.name.value}: defined {self.target}(), which MindFormers calls and the class lacked")
        for stmt, cond, pre, calls_ in self.gated.values():      # one negated block per mode test
            self.add_insert(self.plan.insert_after, stmt, pre + [f"if {cond}:\n" + "".join(f"    {c}\n" for c in calls_)])
        for site in prune:
            klass = self.class_at(site.line)
            if klass is None:
                continue
            assign = next((n for n in walk_nodes(klass) if isinstance(n, cst.SimpleStatementLine)
                           and self.pos[n].start.line == site.line and assign_to(n, site.instance)), None)
            if assign is not None and chained_shard(assign.body[0].value) is not None:
                self.plan.unchain.add(id(assign.body[0]))
            for n in walk_nodes(klass):
                if isinstance(n, cst.SimpleStatementLine) and shard_call_of(n, site.instance) is not None:
                    self.plan.remove.add(id(n))
            self.notes.append(f"{klass.name.value}: removed the redundant shard() of self.{site.instance}")
        new = self.module.visit(_Rewriter(self.plan, self.new_methods))
        if self.plan.needs_layout_import and not imports_layout(new):
            new = add_layout_import(new)
        if self.plan.needs_mf_layout_import and self.binds is None:
            new = add_import(new, f"from {MF_LAYOUT_MODULE} import layout\n")
        return wrap_long_lines(new.code, code), self.notes
