"""``strategist compare``'s report as console text or Markdown: the three columns side by side, the operators that
differ, their regions and the steps toward the reference."""
from __future__ import annotations

from ..advice.minimality import group_key
from ..advice.worth import PAY_FLOOR
from .render import human_bytes, render_table, strategy_text


COLUMNS = ("a", "b", "b_ms", "c")


TITLES = {"a": "(a) strategist advice", "b": "(b) MindFormers sharding_propagation(), strategist",
          "b_ms": "(b') MindFormers sharding_propagation(), MindSpore", "c": "(c) MindFormers shard() (reference)"}


def comparison_text(cmp, max_rows: int = 20, markdown: bool = False) -> str:
    """A comparison (:class:`strategist.compare.Comparison3`) as console text, or Markdown (``markdown``: its tables
    as Markdown tables)."""
    cols = [cmp.columns[k] for k in COLUMNS if k in cmp.columns]
    out = [f"model: {cmp.model}   mesh: {cmp.mesh} ({cmp.mesh.size} devices)   operators: {cmp.graph_ops}   "
           f"dataset: {cmp.dataset_strategy}", ""]

    def cell(c, f):
        if c.error:
            return "-"
        try:
            return f(c)
        except (TypeError, KeyError):
            return "-"
    rows = [
        ["anchors"] + [cell(c, lambda c: str(c.anchors)) for c in cols],
        ["communication / step"] + [cell(c, lambda c: human_bytes(c.totals["total_bytes"])) for c in cols],
        ["communication time"] + [cell(c, lambda c: f"{c.totals['total_seconds'] * 1e3:.3f} ms") for c in cols],
        # compare weighs plans by the advisor's measure (the schedule's step, or the serial sum): named so
        [cmp.measure] + [cell(c, lambda c: f"{c.totals['step_seconds'] * 1e3:.3f} ms") for c in cols],
        ["memory / device"] + [cell(c, lambda c: human_bytes(c.memory["total"])) for c in cols],
        ["agreement with (c)"] + [cell(c, lambda c: f"{c.agreed}/{c.total} ({100 * c.agreement:.1f} %)")
                                  for c in cols],
        ["differing ops moving no data"] + [cell(c, lambda c: f"{c.quiet_disagreements} of "
                                                             f"{len(c.disagreements)}") for c in cols],
        ["on the experts' configured ops"] + [
            cell(c, lambda c: f"{c.configured_agreed}/{c.configured_total} "
                              f"({100 * c.configured_agreement:.1f} %)") for c in cols],
    ]
    out += render_table([""] + [c.title for c in cols], rows, markdown)
    r = cmp.step_ratio()
    if r is not None:
        out.append(f"{cmp.measure} (a)/(c): {r:.3f}")
    for c in cols:
        if c.error:
            out.append(f"{c.title}: not available: {c.error}")
    for c in cols:
        if c.key == "c" or c.error or not c.disagreements:
            continue
        out += ["", f"{c.title}: {len(c.disagreements)} operators differ from (c)"
                + (f" (first {max_rows})" if max_rows and len(c.disagreements) > max_rows else "")]
        shown = c.disagreements[:max_rows] if max_rows else c.disagreements
        what_if = c.key == "a" and any(d.if_reference is not None for d in c.disagreements)
        out += render_table(["operator", "type", "strategy", "(c) strategy", "(c) by", "comm", "(c) comm"]
                            + (["step if (c)'s"] if what_if else []),
                            [[d.op, d.type, strategy_text(d.strategy), strategy_text(d.reference),
                              d.reference_by or ("experts" if d.configured else "propagation"),
                              human_bytes(d.bytes), human_bytes(d.ref_bytes)]
                             + ([_what_if_text(d)] if what_if else []) for d in shown], markdown)
        if what_if:
            faster = c.reference_faster
            out.append(f"step if (c)'s: the step estimate's change with the operator (and the same operator of "
                       f"every repeated layer) anchored as (c) has it, on top of the advice (* a functional "
                       f"call: no shard() line can carry it); "
                       f"{len(faster)} faster" + (": " + patterns_text(faster, getattr(c.plan, "graph", None)) if faster else ""))
        if c.key == "a" and c.regions:
            out += _regions_text(c, max_rows, markdown)
        if c.key == "a" and len(c.toward) > 1:
            out += _toward_text(c, cmp.columns["c"].totals.get("step_seconds"), cmp.columns["b"], cmp.measure,
                                markdown)
    notes = cmp.notes + [f"{c.key}: {n}" for c in cols for n in c.notes]
    if notes:
        out += ["", "notes:"] + [f"  {n}" for n in notes]
    return "\n".join(out) + "\n"


def patterns_text(ds: list, graph=None) -> str:
    """The operators of ``ds`` one pattern across repeated layers at a time (``layers.*`` and how many), in order."""
    groups: dict[str, list] = {}
    for d in ds:
        groups.setdefault(group_key(d.op, graph), []).append(d)
    return ", ".join((key if len(g) > 1 else g[0].op) + (f" ({len(g)} layers)" if len(g) > 1 else "")
                     + ("" if g[0].held else " (functional call: no shard() line)") for key, g in groups.items())


def _regions_text(c, max_rows: int, markdown: bool = False) -> list[str]:
    priced = [r for r in c.regions if r.if_reference is not None]
    faster = c.regions_reference_faster
    out = ["", f"{c.title}: its differences by region (differing operators joined by edges, each repeated layer's "
               f"together), (c)'s layout on the whole region on top of the advice: {len(c.regions)} regions, "
               f"{len(priced)} priced, {len(faster)} faster"]
    shown = sorted(priced, key=lambda r: (r.if_reference, r.patterns)) + [r for r in c.regions if r.if_reference is None]
    shown = shown[:max_rows] if max_rows else shown
    out += render_table(["region (its first operator)", "patterns", "operators", "step if (c)'s"],
                        [[r.name, str(len(r.patterns)), str(len(r.ops)),
                          f"{r.if_reference * 1e3:+.3f} ms" + ("" if r.held else " *") if r.if_reference is not None
                          else "- " + r.unpriced] for r in shown], markdown)
    if c.if_reference_everywhere is not None:
        worth = "faster" if c.if_reference_everywhere < -PAY_FLOOR else "no faster"
        out.append(f"(c)'s layout at every difference at once, on top of the advice: "
                   f"{c.if_reference_everywhere * 1e3:+.3f} ms ({worth})")
    return out


def _toward_text(c, ref_step: float | None, b, measure: str, markdown: bool = False) -> list[str]:
    functional = sum(not d.held for d in c.disagreements if d.type != "Cast")
    out = ["", f"{c.title} toward (c): (c)'s layout region by region on top of the advice, the cheapest per "
               f"operator first, each with the regions before it"
           + (f"; a functional call is anchored by no line ({functional} of the differing operators), it follows "
              f"or not" if functional else "")]
    ratio = (lambda t: f"{t.step_seconds / ref_step:.3f}") if ref_step else (lambda t: "-")
    out += render_table(["region taken", "agreement with (c)", "anchors", measure, f"{measure} / (c)'s"],
                        [[t.region or "(the advice)", f"{t.agreed}/{t.total} ({100 * t.agreement:.1f} %)",
                          str(t.anchors), f"{t.step_seconds * 1e3:.3f} ms", ratio(t)] for t in c.toward], markdown)
    limit = "" if b.error or b.anchors is None else f" and no more anchors than (b) ({b.anchors})"
    t = c.closest
    out.append(f"closest to (c) with a step no slower than (c)'s{limit}: "
               + (f"{t.agreed}/{t.total} ({100 * t.agreement:.1f} %), {t.anchors} anchors, "
                  f"step {t.step_seconds * 1e3:.3f} ms" + (f" (after {t.region})" if t.region else " (the advice)")
                  if t else "none"))
    return out


def _what_if_text(d) -> str:
    if d.if_reference is None:
        return "-"
    return f"{d.if_reference * 1e3:+.3f} ms" + ("" if d.held else " *")
