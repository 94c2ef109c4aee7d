#!/usr/bin/python3
"""Opens a silt-perf HTML report in headless Chromium and checks that its charts are drawn.

    check_html_report.py [--chromium PATH] REPORT.html
    check_html_report.py [--chromium PATH] --perf-tests BUILD/perf/perf_tests [--self-test]

With --perf-tests, the sample report is written by that gtest binary (the test
ReportSample.WritesTheSampleHtmlWhereAsked, told where by SILT_PERF_SAMPLE_HTML) and checked.
--self-test then damages the sample in ways that must fail the check (lines of no length,
charts of no width, hidden lines, a truncated file, an external image, a script) and fails
unless each of them does.

How: the report carries no script, so the check opens a copy with a small one added at the
top of <head>, before the report's Content-Security-Policy (which, as a <meta>, only governs
what follows it). After the page loads, the script measures every <svg class="chart"> and its
<g class="series"> lines (on-screen size, path length, bounding box, computed style), collects
every resource the page fetched and every fetch or script the policy blocked, and writes it
all as JSON into an attribute of <html>, which Chromium's --dump-dom prints. Exit status: 0
when the report passes, 1 when it does not (the reasons on stderr), 77 when Chromium is
missing (ctest's SKIP_RETURN_CODE).
"""

import argparse
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The charts every report has (perf/report.h); backlog may be empty in a run without consumers.
REQUIRED_CHARTS = ["throughput_mib", "throughput_msgs", "produce_latency", "e2e_latency"]

MEASURE = r"""<script>
(function () {
  var blocked = [];
  document.addEventListener('securitypolicyviolation', function (e) {
    blocked.push(e.violatedDirective + ' ' + (e.blockedURI || ''));
  });
  window.addEventListener('load', function () {
    var charts = [];
    document.querySelectorAll('svg.chart').forEach(function (svg) {
      var box = svg.getBoundingClientRect();
      var view = svg.viewBox.baseVal;
      var series = [];
      svg.querySelectorAll('g.series').forEach(function (g) {
        var path = g.querySelector('path');
        var style = path ? getComputedStyle(path) : null;
        var b = g.getBBox();
        var shown = g.getBoundingClientRect();
        series.push({
          name: g.getAttribute('data-series'),
          declared: Number(g.getAttribute('data-points')),
          path_points: path ? (path.getAttribute('d').match(/[ML]/g) || []).length : 0,
          length: path ? path.getTotalLength() : 0,
          stroked: style ? style.stroke !== 'none' && parseFloat(style.strokeWidth) > 0 &&
                           style.visibility !== 'hidden' && style.display !== 'none' : false,
          dots: g.querySelectorAll('circle').length,
          bbox: [b.x, b.y, b.width, b.height],
          shown: [shown.width, shown.height]
        });
      });
      charts.push({
        name: svg.getAttribute('data-chart'),
        empty: svg.getAttribute('data-empty') === 'true',
        width: box.width, height: box.height,
        view: view ? [view.width, view.height] : [0, 0],
        series: series
      });
    });
    document.documentElement.setAttribute('data-silt-check', JSON.stringify({
      charts: charts,
      blocked: blocked,
      fetched: performance.getEntriesByType('resource').map(function (e) { return e.name; }),
      title: document.title
    }));
  });
})();
</script>
"""


class _Attrs(html.parser.HTMLParser):
    """The attributes of the first <html> tag and the text of the first <title>."""

    def __init__(self):
        super().__init__()
        self.html_attrs = None
        self.title = None
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "html" and self.html_attrs is None:
            self.html_attrs = dict(attrs)
        if tag == "title" and self.title is None:
            self._in_title = True
            self.title = ""

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def instrument(report):
    """The report with the measuring script first thing in <head>."""
    m = re.search(r"<head[^>]*>", report, re.IGNORECASE)
    at = m.end() if m else 0
    return report[:at] + "\n" + MEASURE + report[at:]


def measure(chromium, report, workdir):
    """Loads the instrumented report in Chromium; returns (measurements, error)."""
    page = os.path.join(workdir, "instrumented.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(instrument(report))
    cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-extensions",
           "--no-first-run", "--user-data-dir=" + os.path.join(workdir, "profile"),
           "--window-size=1200,900", "--virtual-time-budget=5000", "--dump-dom",
           "file://" + os.path.abspath(page)]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return None, "Chromium did not finish within 120 s"
    if run.returncode != 0:
        return None, "Chromium exited with %d: %s" % (run.returncode, run.stderr[-2000:])
    parser = _Attrs()
    parser.feed(run.stdout)
    raw = (parser.html_attrs or {}).get("data-silt-check")
    if not raw:
        return None, "the page did not finish loading (no measurements in Chromium's DOM dump)"
    return json.loads(raw), None


def problems_of(report, m, allow_empty):
    """Everything wrong with the measurements `m` of `report`, as sentences."""
    problems = []
    charts = {c["name"]: c for c in m["charts"]}
    for name in REQUIRED_CHARTS:
        if name not in charts:
            problems.append("chart %s is missing" % name)
    if not m["charts"]:
        problems.append("the page has no <svg class=\"chart\">")
    for c in m["charts"]:
        where = "chart %s" % c["name"]
        if not (c["width"] > 0 and c["height"] > 0):
            problems.append("%s is %gx%g pixels on screen" % (where, c["width"], c["height"]))
        if c["empty"]:
            if not allow_empty and c["name"] in REQUIRED_CHARTS:
                problems.append("%s says it has no data" % where)
            continue
        if not c["series"]:
            problems.append("%s has no lines" % where)
        vw, vh = c["view"]
        drawn = 0
        for s in c["series"]:
            line = "%s, line %s" % (where, s["name"])
            if s["declared"] == 0:
                continue
            if s["path_points"] != s["declared"]:
                problems.append("%s has %d points in its path, %d declared"
                                % (line, s["path_points"], s["declared"]))
            has_line = s["length"] > 0 and s["stroked"]
            has_dots = s["dots"] > 0 and s["bbox"][2] > 0 and s["bbox"][3] > 0
            if not (has_line or has_dots) or max(s["shown"]) <= 0:
                problems.append("%s is not drawn (length %g, bbox %gx%g, %d dots, stroked %s)"
                                % (line, s["length"], s["bbox"][2], s["bbox"][3], s["dots"],
                                   s["stroked"]))
                continue
            x, y, w, h = s["bbox"]
            if x < -1 or y < -1 or x + w > vw + 1 or y + h > vh + 1:
                problems.append("%s is drawn outside its chart (bbox %g,%g %gx%g in %gx%g)"
                                % (line, x, y, w, h, vw, vh))
            drawn += 1
        if drawn == 0:
            problems.append("%s draws none of its lines" % where)
    for b in m["blocked"]:
        problems.append("the page tried what its Content-Security-Policy forbids: %s" % b)
    for r in m["fetched"]:
        problems.append("the page fetched %s" % r)
    parser = _Attrs()
    parser.feed(report)
    # document.title strips and collapses white space.
    if parser.title is not None and m["title"] != " ".join(parser.title.split()):
        problems.append("the document's title changed from %r to %r: did a script run?"
                        % (parser.title, m["title"]))
    return problems


def check(chromium, report, workdir, allow_empty):
    """The problems of one report (an empty list when it passes) and a one-line summary."""
    m, error = measure(chromium, report, workdir)
    if error:
        return [error], ""
    problems = problems_of(report, m, allow_empty)
    lines = sum(1 for c in m["charts"] for s in c["series"] if s["declared"] > 0)
    points = sum(s["declared"] for c in m["charts"] for s in c["series"])
    return problems, "%d charts, %d lines, %d points drawn" % (len(m["charts"]), lines, points)


def damaged(report):
    """Copies of a good report that the check must reject, by name."""
    def flatten(match):
        n = len(re.findall(r"[ML]", match.group(1)))
        return ' d="' + " ".join(["M0,0"] + ["L0,0"] * (n - 1)) + '"'

    def styled(css):
        return report.replace("</head>", "<style>" + css + "</style></head>", 1)

    body = re.search(r"<body[^>]*>", report).end()
    return {
        "lines of no length": re.sub(r"<circle[^>]*/>", "",
                                     re.sub(r' d="([^"]*)"', flatten, report)),
        "charts of no width": styled("svg.chart { width: 0 !important; }"),
        "hidden lines": styled("g.series { display: none; }"),
        "a truncated file": report[: len(report) * 2 // 5],
        "an external image": report[:body] + '<img src="http://127.0.0.1:9/x.png" alt="">'
                             + report[body:],
        "a script": report[:body] + "<script>document.title = 'ran';</script>" + report[body:],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", nargs="?", help="the HTML report to check")
    ap.add_argument("--perf-tests", help="the perf_tests binary, to write the sample report")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM") or shutil.which("chromium")
                    or "/usr/bin/chromium")
    ap.add_argument("--allow-empty", action="store_true",
                    help="accept charts that say they have no data (a run without consumers)")
    ap.add_argument("--self-test", action="store_true",
                    help="also check that damaged copies of the report fail")
    args = ap.parse_args()
    if bool(args.report) == bool(args.perf_tests):
        ap.error("give either a report or --perf-tests")
    if not (os.path.isfile(args.chromium) and os.access(args.chromium, os.X_OK)):
        print("check_html_report: SKIP: no Chromium at %s" % args.chromium, file=sys.stderr)
        return 77

    with tempfile.TemporaryDirectory(prefix="silt-html-check-") as workdir:
        path = args.report
        if args.perf_tests:
            path = os.path.join(workdir, "sample.html")
            env = dict(os.environ, SILT_PERF_SAMPLE_HTML=path)
            run = subprocess.run([args.perf_tests,
                                  "--gtest_filter=ReportSample.WritesTheSampleHtmlWhereAsked"],
                                 env=env, capture_output=True, text=True, timeout=120,
                                 check=False)
            if run.returncode != 0 or not os.path.isfile(path):
                print("check_html_report: FAIL: %s did not write the sample report:\n%s"
                      % (args.perf_tests, run.stdout[-3000:] + run.stderr[-3000:]),
                      file=sys.stderr)
                return 1
        try:
            with open(path, encoding="utf-8") as f:
                report = f.read()
        except (OSError, UnicodeDecodeError) as e:
            print("check_html_report: FAIL: cannot read %s: %s" % (path, e), file=sys.stderr)
            return 1

        problems, summary = check(args.chromium, report, workdir, args.allow_empty)
        if problems:
            print("check_html_report: FAIL: %s:" % path, file=sys.stderr)
            for p in problems:
                print("  - " + p, file=sys.stderr)
            return 1
        print("check_html_report: OK: %s: %s" % (path, summary))

        if args.self_test:
            missed = []
            for name, bad in damaged(report).items():
                problems, _ = check(args.chromium, bad, workdir, args.allow_empty)
                if problems:
                    print("check_html_report: self-test: %s rejected: %s" % (name, problems[0]))
                else:
                    missed.append(name)
            if missed:
                print("check_html_report: FAIL: the check passed damaged reports: %s"
                      % ", ".join(missed), file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
