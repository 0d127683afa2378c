"""HTML report benchmark: ``strategist advise --format html`` on the 80-layer LLaMA-2-70B-shaped example over 64
devices (dp=8, tp=8). Prints the page's size, the time to render it, and what headless Chromium measures opening
it from a file:// URL (its own paint timing: first paint, first contentful paint, the load event), and the wall
time of a headless screenshot (start, load, paint, capture). Targets: under 2 MB, under 2 s to first paint.

    .venv/bin/python bench/html.py [--layers 80] [--batch 8] [--mesh dp=8,tp=8]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)
os.environ.setdefault("GLOG_v", "4")

#: added to the bench's copy of the page only: the browser's own timings, written into the DOM once painted
PROBE = """<script>
window.addEventListener("load", function () {
  function write() {
    var t = {}, nav = performance.getEntriesByType("navigation")[0];
    performance.getEntriesByType("paint").forEach(function (p) { t[p.name] = p.startTime; });
    if (nav) { t.dom_content_loaded = nav.domContentLoadedEventEnd; t.load = nav.loadEventStart; }
    var pre = document.getElementById("bench-timing") || document.body.appendChild(document.createElement("pre"));
    pre.id = "bench-timing"; pre.textContent = JSON.stringify(t);
  }
  write();                                  /* at the load event: painted already on a long page */
  requestAnimationFrame(function () { setTimeout(write, 0); });
});
</script>"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser() -> str | None:
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--mesh", default="dp=8,tp=8")
    args = ap.parse_args()
    from strategist.api import advise_model
    from strategist.cost.step import StepOptions
    from strategist.report.html import advice_html
    model = os.path.join(ROOT, "examples", "llama.py") + ":llama2_70b"
    t = time.perf_counter()
    advice = advise_model(model, args.mesh, kwargs=[f"layers={args.layers}", f"batch={args.batch}"],
                          dataset_strategy="full_batch", step=StepOptions())
    t_advise = time.perf_counter() - t
    t = time.perf_counter()
    page = advice_html(advice)
    t_render = time.perf_counter() - t
    size = len(page.encode("utf-8"))
    print(f"model llama2_70b, {args.layers} layers, batch {args.batch}, --mesh {args.mesh}: "
          f"{len(advice.graph)} operators, {advice.plan.mesh.size} devices")
    print(f"advise {t_advise:.1f} s; HTML rendered in {t_render:.2f} s")
    print(f"page size {size / 2**20:.2f} MB ({size} bytes; target < 2 MB)")
    exe = browser()
    if exe is None:
        print("no headless Chromium on PATH (apt-get install chromium): browser timings skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "report.html")
        probed = os.path.join(tmp, "probed.html")
        with open(plain, "w", encoding="utf-8") as f:
            f.write(page)
        with open(probed, "w", encoding="utf-8") as f:
            f.write(page.replace("</body>", PROBE + "\n</body>"))
        timing: dict = {}
        for _ in range(3):                      # the first paint can come after the load event's dump
            dom = subprocess.run([exe, *FLAGS, f"--user-data-dir={tmp}/p1", "--dump-dom", "file://" + probed],
                                 capture_output=True, text=True, timeout=300).stdout
            m = re.search(r'<pre id="bench-timing">(.*?)</pre>', dom)
            timing = json.loads(m.group(1).replace("&quot;", '"')) if m else {}
            if "first-paint" in timing:
                break
        for key in ("first-paint", "first-contentful-paint", "dom_content_loaded", "load"):
            if key in timing:
                print(f"chromium {key.replace('_', ' ')}: {timing[key] / 1e3:.3f} s")
        if not timing:
            print("chromium reported no paint timing")
        t = time.perf_counter()
        subprocess.run([exe, *FLAGS, f"--user-data-dir={tmp}/p2", "--window-size=1400,1000",
                        f"--screenshot={tmp}/shot.png", "file://" + plain], capture_output=True, timeout=300)
        wall = time.perf_counter() - t
        print(f"headless screenshot, wall time (browser start, load, first paint, capture): {wall:.2f} s "
              f"(target < 2 s to first paint)")


if __name__ == "__main__":
    main()
