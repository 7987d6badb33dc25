"""vrambench report: results files as one self-contained HTML page.

    python3 -m vrambench.report FILE... --out report.html [--no-plots]

(`vrambench report FILE... -o report.html` runs this and writes the page
through vrambench's safe writer.) The page loads nothing: CSS and the
table-sorting script are inline, plots are PNGs embedded as data: URIs, and
its Content-Security-Policy forbids any other source. It holds, per file,
the environment (device, driver, CUDA runtime, commit, date, simulated or
not); run and replay files' summary and overhead tables (sortable: click a
heading); claims' verdicts; microbench latencies; a tune's candidates and
recommendation; and the plots of `python3 -m vrambench.plots` when
matplotlib is there (else the page says why they are missing).

Every text from a file is escaped (html.escape): a name in a results file
cannot add markup or script to the page. Files are read and checked by
vrambench.results; a bad one is one error line and exit status 2, before
anything is written.
"""

import argparse
import base64
import contextlib
import datetime
import html
import io
import os
import shutil
import sys
import tempfile

from vrambench import arguments
from vrambench.output import run_main, shown, signals_held
from vrambench.results import InputError, check_text, is_number, mib_up, parse_claims, parse_result, read_json

PROG = "vrambench"
MIB = 1024.0 * 1024.0


def esc(value):
    """Text for HTML content or a quoted attribute."""
    return html.escape(str(value), quote=True)


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------

class Document:
    """One input file: its kind, context, and what its sections need."""

    def __init__(self, path, kind, context, raw):
        self.path = path            # where it is read (a copy the C command made of a pipe or FIFO)
        self.name = path            # the name it was given
        self.kind = kind            # run, replay, tune, microbench, claims
        self.context = context
        self.raw = raw
        self.result = None          # vrambench.results.Result (run, replay, tune, microbench)
        self.claims = None          # vrambench.results.Claims

    @property
    def label(self):
        return os.path.basename(self.name)


def kind_of(raw):
    """The kind of a parsed file, as vrambench compare names them."""
    if isinstance(raw, dict) and isinstance(raw.get("claims"), list):
        return "claims"
    if isinstance(raw, dict) and "recommendation" in raw:
        return "tune"
    entries = raw.get("benchmarks") if isinstance(raw, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            break
        name = entry.get("name")
        scenario = entry.get("scenario")
        label = scenario if isinstance(scenario, str) else name if isinstance(name, str) else ""
        if isinstance(name, str) and name.startswith("microbench/"):
            return "microbench"
        if label.startswith("tune:"):
            return "tune"
        if label.startswith("replay:"):
            return "replay"
        return "run"
    return "run"


def load(path, name=None):
    """A Document for path; InputError when it is not a results file. With
    `name` (the file the user gave, which `vrambench report` read into the
    copy at `path`: a pipe or FIFO gives its bytes once), the document and
    its errors are named `name`, and the copy's path is shown nowhere."""
    label = path if name is None else name
    raw = read_json(path, name=label)
    kind = kind_of(raw)
    if kind == "claims":
        claims = parse_claims(label, raw)
        if not raw["claims"]:
            raise InputError(f"{label} holds no claim: nothing to report")
        document = Document(path, kind, claims.context, raw)
        document.claims = claims
    else:
        result = parse_result(label, raw)
        document = Document(path, kind, result.context, raw)
        document.result = result
        if kind == "tune":
            check_tune(label, raw)
        # A page of empty tables said nothing and exited 0; compare and
        # check-sim refuse the same file.
        if not result.runs and not result.microbench:
            raise InputError(f"{label} holds no case ('benchmarks' has no run): nothing to report")
    document.name = label
    return document


# The figures of a tune's entries (and of its recommendation's saving) that
# the page shows: each a number or null (not shown).
TUNE_FIGURES = ("peak_reserved_bytes", "utilization", "driver_alloc_calls", "driver_free_calls", "ooms_at_capacity",
                "min_capacity_bytes")
SAVING_FIGURES = ("peak_reserved_bytes", "peak_reserved_percent")
RECOMMENDATION_BYTES = ("peak_reserved_bytes", "min_capacity_bytes", "defaults_peak_reserved_bytes",
                        "defaults_min_capacity_bytes")


def check_figures(values, keys, where):
    for key in keys:
        value = values.get(key)
        if value is not None and (isinstance(value, bool) or not is_number(value)):
            raise InputError(f"{where}: '{key}' is not a number")


def check_tune(path, raw):
    """The texts and figures of a tune's entries and recommendation that the page shows."""
    for index, entry in enumerate(raw["benchmarks"]):
        if "pytorch_alloc_conf" in entry:
            check_text(entry["pytorch_alloc_conf"], f"{path}: benchmarks[{index}]", "pytorch_alloc_conf")
        check_figures(entry, TUNE_FIGURES, f"{path}: benchmarks[{index}]")
    recommendation = raw.get("recommendation")
    if recommendation is None:
        return
    if not isinstance(recommendation, dict):
        raise InputError(f"{path}: 'recommendation' is not an object")
    # What the page says of it: whether it fits, the setting, and why.
    if not isinstance(recommendation.get("fits"), bool):
        raise InputError(f"{path}: recommendation: 'fits' is not true or false")
    for key in ("pytorch_alloc_conf", "why"):
        if not isinstance(recommendation.get(key), str):
            raise InputError(f"{path}: recommendation: no '{key}' text")
    for key in ("pytorch_alloc_conf", "why", "name"):
        if key in recommendation:
            check_text(recommendation[key], f"{path}: recommendation", key)
    check_figures(recommendation, RECOMMENDATION_BYTES, f"{path}: recommendation")
    for key in RECOMMENDATION_BYTES:
        if recommendation.get(key) is not None and recommendation[key] < 0:
            raise InputError(f"{path}: recommendation: '{key}' is negative")
    if isinstance(recommendation.get("saving"), dict):
        check_figures(recommendation["saving"], SAVING_FIGURES, f"{path}: recommendation.saving")


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------

def mib(value):
    return "" if value is None else f"{value / MIB:,.1f}"


def minimum_mib(value):
    """A minimum in MiB, rounded up to the place shown: from there up it fits."""
    return "" if value is None else f"{mib_up(value, 1):,.1f}"


def duration(ns):
    if ns is None:
        return ""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def number(value, digits=0):
    return "" if value is None else f"{value:,.{digits}f}"


def cell(text, sort=None, css=None):
    """A <td>; `sort` the value it sorts by (a number), else its text."""
    attributes = ""
    if sort is not None:
        attributes += f' data-v="{esc(repr(float(sort)))}"'
    if css:
        attributes += f' class="{esc(css)}"'
    return f"<td{attributes}>{esc(text)}</td>"


def table(headings, rows, caption=None, css="sortable"):
    """A sortable table: headings are texts, rows lists of cell() strings."""
    out = [f'<table class="{esc(css)}">']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headings) + "</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


# --------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------

def environment(documents):
    rows = []
    for document in documents:
        context = document.context
        shard = context.get("shard")
        merged = context.get("merged_from")
        origin = ""
        if isinstance(shard, dict):
            origin = f"shard {shard.get('index')}/{shard.get('count')}"
        elif isinstance(merged, list):
            origin = f"merged from {len(merged)} files"
        simulated = context.get("simulated") is True
        rows.append([
            cell(document.label), cell(document.kind),
            cell(context.get("device_name", "")),
            cell("yes: memory exact, times host-side" if simulated else "no", css="sim" if simulated else None),
            cell(context.get("driver_version", "")), cell(context.get("runtime_version", context.get("cuda_version", ""))),
            cell(str(context.get("git_commit", ""))[:12]), cell(context.get("date", "")),
            cell(context.get("host_name", "")), cell(context.get("trace_path", "")), cell(origin),
        ])
    return ("<h2>Environment</h2>\n" + table(
        ["file", "kind", "device", "simulated", "driver", "CUDA runtime", "commit", "date", "host", "trace",
         "shards"], rows))


def summary_rows(document):
    rows = []
    for run in document.result.runs:
        values = run.values
        calls = None
        if "driver_alloc_calls" in values or "driver_free_calls" in values:
            calls = values.get("driver_alloc_calls", 0) + values.get("driver_free_calls", 0)
        rows.append([
            cell(run.scenario), cell(run.allocator),
            cell(mib(values.get("peak_requested_bytes")), values.get("peak_requested_bytes")),
            cell(mib(values.get("peak_allocated_bytes")), values.get("peak_allocated_bytes")),
            cell(mib(values.get("peak_reserved_bytes")), values.get("peak_reserved_bytes")),
            cell(number(values.get("overhead_ratio"), 3), values.get("overhead_ratio")),
            cell(number(calls), calls),
            cell(number(values.get("ooms")), values.get("ooms"), css="bad" if values.get("ooms") else None),
            cell(number(values.get("first_oom_line")), values.get("first_oom_line")),
            cell(duration(run.real_time_ns), run.real_time_ns),
        ])
    return rows


SUMMARY_HEADINGS = ["scenario", "allocator", "peak requested MiB", "peak allocated MiB", "peak reserved MiB",
                    "overhead", "driver calls", "OOMs", "first OOM line", "time/iter"]


def overhead_matrix(document):
    """Scenario x allocator: overhead (peak reserved / peak requested)."""
    runs = document.result.runs
    allocators = list(dict.fromkeys(run.allocator for run in runs))
    scenarios = list(dict.fromkeys(run.scenario for run in runs))
    value = {(run.scenario, run.allocator): run.values.get("overhead_ratio") for run in runs}
    rows = []
    for scenario in scenarios:
        row = [cell(scenario)]
        for allocator in allocators:
            ratio = value.get((scenario, allocator))
            row.append(cell(number(ratio, 3), ratio))
        rows.append(row)
    return table(["scenario"] + allocators, rows,
                 caption="overhead: peak reserved / peak requested (1.000 is ideal)")


def time_note(document):
    if document.context.get("simulated") is True:
        return ('<p class="note">Simulated device: memory figures are exact for each policy; times are host-side, '
                'not GPU times.</p>')
    return ""


def run_section(document, title):
    return "\n".join([
        f"<h2>{esc(title)}: {esc(document.label)}</h2>", time_note(document),
        table(SUMMARY_HEADINGS, summary_rows(document), caption="summary (click a heading to sort)"),
        overhead_matrix(document),
    ])


def claims_section(document):
    catalogue = {row.get("id"): row for row in document.claims.catalogue}
    rows = []
    for claim in document.claims.claims:
        verdict = claim.get("verdict", "")
        css = {"holds": "good", "does not hold": "bad"}.get(verdict, "depends")
        text = catalogue.get(claim.get("id"), {}).get("claim", claim.get("claim", ""))
        rows.append([cell(claim.get("id", "")), cell(claim.get("allocator", "")), cell(verdict, css=css),
                     cell(claim.get("reason", "")), cell(text)])
    return (f"<h2>Claims: {esc(document.label)}</h2>\n" + time_note(document) +
            table(["claim", "allocator", "verdict", "reason", "the claim"], rows))


def microbench_section(document):
    rows = []
    for allocator, size, values in document.result.microbench:
        rows.append([cell(allocator), cell(number(size), size),
                     cell(duration(values.get("pair_ns_p50")), values.get("pair_ns_p50")),
                     cell(duration(values.get("pair_ns_p99")), values.get("pair_ns_p99")),
                     cell(number(values.get("driver_allocs_per_pair"), 3), values.get("driver_allocs_per_pair")),
                     cell(number(values.get("threads", 1)), values.get("threads", 1))])
    return (f"<h2>Microbench: {esc(document.label)}</h2>\n" + time_note(document) +
            table(["allocator", "bytes", "malloc+free p50", "p99", "driver allocs/pair", "threads"], rows))


def tune_section(document):
    raw = document.raw
    rows = []
    for entry in raw["benchmarks"]:
        if entry.get("run_type", "iteration") != "iteration":
            continue
        conf = entry.get("pytorch_alloc_conf")
        shown = f"'{conf}'" if conf is not None else f"[{entry.get('allocator', '')}]"
        reserved = entry.get("peak_reserved_bytes")
        calls = (entry.get("driver_alloc_calls") or 0) + (entry.get("driver_free_calls") or 0)
        front = entry.get("on_pareto_front")
        rows.append([cell(shown), cell(mib(reserved), reserved),
                     cell(number(entry.get("utilization"), 3), entry.get("utilization")),
                     cell(number(calls), calls),
                     cell(number(entry.get("ooms_at_capacity")), entry.get("ooms_at_capacity"),
                          css="bad" if entry.get("ooms_at_capacity") else None),
                     cell(minimum_mib(entry.get("min_capacity_bytes")) or "none up to 64 TiB", entry.get("min_capacity_bytes")),
                     cell("yes" if front is True else "" if front is None else "no")])
    parts = [f"<h2>Tune: {esc(document.label)}</h2>", time_note(document)]
    recommendation = raw.get("recommendation")
    if isinstance(recommendation, dict) and not recommendation["fits"]:
        parts.append(f'<div class="recommendation"><p>No recommendation: {esc(recommendation["why"])}</p></div>')
    elif isinstance(recommendation, dict):
        saving = recommendation.get("saving") if isinstance(recommendation.get("saving"), dict) else {}
        parts.append('<div class="recommendation"><p>Recommendation: <code>PYTORCH_CUDA_ALLOC_CONF='
                     f"'{esc(recommendation.get('pytorch_alloc_conf', ''))}'</code></p>"
                     f"<p>{esc(recommendation.get('why', ''))}</p>"
                     f"<p>saving against the defaults: {esc(mib(saving.get('peak_reserved_bytes')))} MiB peak "
                     f"reserved ({esc(number(saving.get('peak_reserved_percent'), 1))}%)</p></div>")
    else:
        parts.append('<p class="note">No recommendation: a shard of a tune (merge every shard with '
                     "<code>vrambench merge</code> for it).</p>")
    parts.append(table(["PYTORCH_CUDA_ALLOC_CONF, or [strategy]", "peak reserved MiB", "utilization",
                        "driver calls", "OOMs at capacity", "min capacity MiB", "Pareto front"], rows))
    return "\n".join(parts)


# --------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------

def plots(documents, wanted):
    """(list of (title, PNG bytes), note or None)."""
    if not wanted:
        return [], "Plots: left out (--no-plots)."
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        return [], (f"Plots: not included: matplotlib is not available to {sys.executable} ({error}); install "
                    "python3-matplotlib (or set VB_PYTHON to a python that has it) and run again.")
    images, notes = [], []
    scratch = None
    try:
        with signals_held():  # made and named at once: a signal cannot leave it behind unnamed
            scratch = tempfile.mkdtemp(prefix="vrambench-report-")
        for index, document in enumerate(documents):
            out_dir = os.path.join(scratch, str(index))
            captured = io.StringIO()
            try:
                with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                    if document.kind in ("run", "replay"):
                        from vrambench.plots.cli import main as plot_main
                        status = plot_main([document.path, "--out-dir", out_dir])
                    elif document.kind == "tune" and isinstance(document.raw.get("recommendation"), dict):
                        from vrambench.plots.tune import main as tune_main
                        os.makedirs(out_dir, exist_ok=True)
                        status = tune_main([document.path, "--out", os.path.join(out_dir, "tune.png")])
                    else:
                        continue
            except Exception as error:  # a plot that fails leaves the page without it, said so
                status = f"{type(error).__name__}: {error}"
            if status != 0:
                lines = [line for line in captured.getvalue().splitlines() if "error" in line]
                notes.append(f"{document.label}: plots failed ({lines[-1] if lines else status})")
                continue
            for name in sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []:
                if name.endswith(".png"):
                    with open(os.path.join(out_dir, name), "rb") as stream:
                        images.append((f"{document.label}: {name}", stream.read()))
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return images, "; ".join(notes) or None


def plots_section(images, note):
    parts = ["<h2>Plots</h2>"]
    if note:
        parts.append(f'<p class="note">{esc(note)}</p>')
    for title, data in images:
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(f'<figure><img alt="{esc(title)}" src="data:image/png;base64,{encoded}">'
                     f"<figcaption>{esc(title)}</figcaption></figure>")
    if not images and not note:
        parts.append('<p class="note">No plots: none of the files is a run, replay or tune result.</p>')
    return "\n".join(parts)


# --------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.8em 0;font-size:13px}
caption{text-align:left;font-style:italic;padding:.2em 0}
th,td{border:1px solid #ddd;padding:.2em .5em;text-align:right}
td:not([data-v]),th{text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
.good{background:#e6f4e6}.bad{background:#fbe3e3}.depends{background:#fff6d9}.sim{background:#eef}
.note{color:#555}.recommendation{border:1px solid #9c9;background:#f4fbf4;padding:.2em 1em}
figure{display:inline-block;margin:.5em}img{max-width:100%}#js-errors:empty{display:none}
#js-errors{color:#a00;border:1px solid #a00;padding:.5em}
"""

# Sorts a table by a clicked heading: numbers by data-v, other cells by text.
SCRIPT = """
window.addEventListener('error', function (event) {
  document.getElementById('js-errors').textContent += 'script error: ' + event.message + '\\n';
});
function vbSortBy(table, column, th) {
  var body = table.tBodies[0];
  var ascending = th.getAttribute('aria-sort') !== 'ascending';
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = a.cells[column], y = b.cells[column];
    var vx = x && x.hasAttribute('data-v') ? parseFloat(x.getAttribute('data-v')) : null;
    var vy = y && y.hasAttribute('data-v') ? parseFloat(y.getAttribute('data-v')) : null;
    var order = (vx !== null && vy !== null) ? vx - vy
      : (x ? x.textContent : '').localeCompare(y ? y.textContent : '');
    return ascending ? order : -order;
  });
  rows.forEach(function (row) { body.appendChild(row); });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute('aria-sort'); });
  th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
}
Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
    th.addEventListener('click', function () { vbSortBy(table, column, th); });
  });
});
document.body.setAttribute('data-ready', String(document.querySelectorAll('table.sortable').length));
"""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def page(documents, images, plot_note):
    sections = []
    for document in documents:
        if document.kind == "run":
            sections.append(run_section(document, "Run"))
        elif document.kind == "replay":
            sections.append(run_section(document, "Replay"))
        elif document.kind == "claims":
            sections.append(claims_section(document))
        elif document.kind == "microbench":
            sections.append(microbench_section(document))
        elif document.kind == "tune":
            sections.append(tune_section(document))
    made = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    files = ", ".join(esc(document.label) for document in documents)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>vrambench report</title>", f"<style>{STYLE}</style></head>",
        '<body><pre id="js-errors"></pre>',
        "<h1>vrambench report</h1>", f'<p class="note">{files} · made {esc(made)}</p>',
        environment(documents), *sections, plots_section(images, plot_note),
        f"<script>{SCRIPT}</script>", "</body></html>", ""])


def main(argv=None):
    parser = arguments.Parser(prog="vrambench report", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--out", required=True, help="the HTML page ('-': stdout)")
    parser.add_argument("--no-plots", action="store_true", help="leave the plots out")
    # COPY=NAME: the FILE COPY is what vrambench report read from NAME (a pipe or FIFO), shown as NAME
    parser.add_argument("--named", action="append", default=[], metavar="COPY=NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = dict(item.split("=", 1) for item in args.named if "=" in item)
    try:
        documents = [load(path, names.get(path)) for path in args.files]
    except InputError as error:
        # Its file names are the user's: a newline in one must not make two lines.
        print(f"{PROG}: error: {shown(error)}", file=sys.stderr)
        return 2
    images, note = plots(documents, not args.no_plots)
    text = page(documents, images, note)
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:  # a full disk, a file size limit: one line, not a traceback
        print(f"{PROG}: error: report: cannot write the page: {shown(error.strerror or error)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # SIGINT, SIGTERM, SIGHUP: the plots' temporary folder is removed, no traceback
    run_main(main, PROG)
