"""``--format html``: one self-contained page per report (inline CSS, SVG and a few lines of script; no request
leaves it), rendered with Jinja2 from the templates beside this module. :func:`advice_html`, :func:`plan_html`,
:func:`compare_html`, :func:`sweep_html`."""
from __future__ import annotations


from ...memo import lru
from ... import __version__
from ..render import advice_dict, alike_anchors, human_bytes, rel
from ..step import step_dict
from . import charts
from .sections import plan_sections

#: the page's Content-Security-Policy: nothing but the page itself
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


@lru("report.html.environment", 1)
def environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
    env = Environment(loader=PackageLoader("strategist.report.html", "templates"),
                      autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["bytes"] = human_bytes
    env.filters["ms"] = lambda s: "-" if s is None else charts.ms(s)
    env.filters["gib"] = lambda b: "-" if b is None else f"{b / 2**30:.2f} GiB"
    env.filters["rel"] = rel
    return env


def page(template: str, **context) -> str:
    return environment().get_template(template).render(csp=CSP, version=__version__, **context)


def plan_html(plan) -> str:
    """``strategist propagate --format html``."""
    step = step_dict(plan)
    return page("propagate.html.j2", title=f"strategist propagate: {plan.graph.model}", s=plan_sections(plan, step))


def advice_html(advice, diff: str | None = None, diff_note: str | None = None) -> str:
    """``strategist advise --format html``; ``diff``: the shard() diff of the model's sources."""
    d = advice_dict(advice)
    step = d["plan"].get("step")
    configs = []
    for label, c in d["configurations"].items():
        configs.append({"label": label, "anchors": c["anchors"], "comm_bytes": human_bytes(c["communication_bytes"]),
                        "comm_time": charts.ms(c["communication_seconds"]),
                        "compute": charts.ms(c["compute_seconds"]), "step": charts.ms(c["step_seconds"]),
                        "memory": human_bytes(c["memory"]["total"]), "conflicts": c["conflicts"],
                        "schedule": c.get("schedule")})
    rows = [{"label": c["label"], "row": c["schedule"]} for c in configs if c["schedule"]]
    alike = alike_anchors(d["anchors"], advice.graph)
    return page("advise.html.j2", title=f"strategist advise: {d['model']}", s=plan_sections(advice.plan, step), d=d,
                alike=alike,
                configs=configs, config_chart=charts.bar_chart(rows) if rows else None, diff=diff,
                diff_note=diff_note, operators=len(advice.graph))


def compare_html(cmp, max_rows: int = 0) -> str:
    """``strategist compare --format html``: the three configurations side by side, their disagreements."""
    from ...cost.step import estimate
    d = cmp.to_dict(max_rows)
    rows = []
    for key, col in cmp.columns.items():
        est = estimate(col.plan) if col.plan is not None else None
        if est is not None:
            rows.append({"label": col.title, "row": est.schedule, "key": key})
    return page("compare.html.j2", title=f"strategist compare: {d['model']}", d=d,
                chart=charts.bar_chart(rows) if rows else None)


def sweep_html(result, max_rows: int = 0) -> str:
    """``strategist sweep --format html``: the ranked table and step time against memory per device."""
    d = result.to_dict()
    capacity = None
    for b in d["best"]:
        m = ((b.get("advice") or {}).get("plan") or {}).get("step") or {}
        capacity = capacity or (m.get("memory") or {}).get("capacity")
    pts = [{"x": c["memory_bytes"], "y": c["step_s"], "cls": "dot-fit" if fit else "dot-unfit",
            "label": f"{c['mesh']}: {charts.ms(c['step_s'])}, {human_bytes(c['memory_bytes'] or 0)}"
            + ("" if fit else " (out of memory)")}
           for fit, group in ((True, d["ranked"]), (False, d["unfit"])) for c in group]
    ranked = d["ranked"][:max_rows] if max_rows else d["ranked"]
    return page("sweep.html.j2", title=f"strategist sweep: {d['model']}", d=d, ranked=ranked,
                chart=charts.scatter(pts, capacity))
