"""The command line of python/vrambench/plots (see its docstring): options, file
loading and checks (python/vrambench/results.py), then every figure of the table
python/vrambench/plots/figures.py draws into PNGs, all of them or none.
"""

import os
import shutil
import sys
import tempfile

from vrambench import arguments
from vrambench.output import OutputError, commit_files, run_main, shown, signals_held, signals_raise
from vrambench.results import (PROG, InputError, check_same_device, choose_segments_run,
                           find_latest, load_microbench, load_run_result, note)

EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


def matplotlib_missing(error):
    """The error message for matplotlib's ImportError `error` (no traceback)."""
    return (f"matplotlib is not available to {sys.executable} ({error}); "
            "install python3-matplotlib or run with a python that has it")


# --------------------------------------------------------------------------
# Output: all PNGs or none
# --------------------------------------------------------------------------

class Output:
    """Renders PNGs into a temporary folder inside out_dir; commit() moves
    them into out_dir, discard() removes them, so a failed run leaves no
    partial set behind."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.staging = None
        try:
            os.makedirs(out_dir, exist_ok=True)
            with signals_held():
                self.staging = tempfile.mkdtemp(prefix=".plot-", dir=out_dir)
        except FileExistsError:  # makedirs: something not a folder has the name
            raise InputError(f"{out_dir}: not a directory (--out-dir names the folder the PNGs go into)") from None
        except OSError as error:
            raise InputError(f"{out_dir}: cannot write there ({error.strerror or error})") from None
        except BaseException:  # a signal held while the folder was made: nothing else would remove it
            if self.staging:
                shutil.rmtree(self.staging, ignore_errors=True)
            raise
        self.names = []

    def save(self, figure, name):
        """Writes figure as PNG `name` (made unique) and closes it."""
        base, number = name[:-len(".png")], 2
        while name in self.names:
            name = f"{base}-{number}.png"
            number += 1
        figure.savefig(os.path.join(self.staging, name), bbox_inches="tight")
        pyplot().close(figure)
        self.names.append(name)

    def commit(self):
        """Moves every PNG into out_dir (vrambench.output.commit_files: each
        fsync'ed, every target checked to be a regular file or missing
        first); returns their final paths."""
        pairs = [(os.path.join(self.staging, name), os.path.join(self.out_dir, name)) for name in self.names]
        with signals_held():  # all of them or none: a Ctrl-C here waits until every PNG is in place
            commit_files(pairs)
        shutil.rmtree(self.staging, ignore_errors=True)
        return [target for _, target in pairs]

    def discard(self):
        shutil.rmtree(self.staging, ignore_errors=True)


def pyplot():
    """matplotlib.pyplot, imported once the input is known to be good."""
    import matplotlib.pyplot as plt
    return plt


def parse_args(argv):
    """The options; argparse exits with status 2 on bad usage."""
    parser = arguments.Parser(
        prog=PROG, description="PNG plots from vrambench results JSON.")
    parser.add_argument("results", nargs="*", metavar="RESULTS.json",
                        help="a `vrambench run` results file; further files are compared "
                             "with the first")
    parser.add_argument("--latest", metavar="DIR",
                        help="plot the newest run result in DIR (by context date; "
                             "claims-*.json excluded) and the newest microbench file of "
                             "the same device")
    parser.add_argument("--out-dir", default=os.path.join("out", "plots"),
                        help="where the PNGs go (default: out/plots)")
    parser.add_argument("--segments", metavar="SCENARIO/ALLOCATOR",
                        help="entry whose segment map to draw (default: the one with the "
                             "largest external_frag_at_peak)")
    parser.add_argument("--microbench", metavar="MICRO.json",
                        help="a `vrambench microbench` file of the same device, for latency "
                             "by size")
    args = parser.parse_args(argv)
    if bool(args.results) == bool(args.latest):
        parser.error("give RESULTS.json files or --latest DIR (one of the two)")
    return args


def load_inputs(args):
    """(first result, microbench or None, other results, segments run) from
    the options; InputError for any bad file or option."""
    if args.latest:
        first, micro = find_latest(args.latest)
        others = []
    else:
        first = load_run_result(args.results[0])
        others = [load_run_result(path) for path in args.results[1:]]
        micro = None
    if args.microbench:
        micro = load_microbench(args.microbench)
    check_same_device(first, micro)
    return first, micro, others, choose_segments_run(first, args.segments)


def draw_all(inputs, out):
    """Draws every figure of the table into out; a figure without its data
    is skipped with a note."""
    from vrambench.plots.figures import FIGURES, NoData
    for figure in FIGURES:
        for name, draw in figure.plan(inputs):
            try:
                drawn = draw()
            except NoData as skipped:
                note(str(skipped))
                continue
            out.save(drawn, name)


def main(argv=None):
    """Runs the script; returns the exit status (0, 1 failure, 2 bad input)."""
    args = parse_args(argv)
    try:
        first, micro, others, segments_run = load_inputs(args)
    except InputError as error:
        print(f"{PROG}: error: {shown(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        from vrambench.plots.figures import Inputs
    except ImportError as error:
        print(f"{PROG}: error: {matplotlib_missing(error)}", file=sys.stderr)
        return EXIT_FAILURE
    with signals_raise():   # SIGTERM, SIGHUP: the staging folder goes too
        try:
            out = Output(args.out_dir)
        except InputError as error:
            print(f"{PROG}: error: {shown(error)}", file=sys.stderr)
            return EXIT_FAILURE
        try:
            draw_all(Inputs(first, micro, others, segments_run), out)
            paths = out.commit()
        except OutputError as error:
            out.discard()
            print(f"{PROG}: error: {shown(error)}", file=sys.stderr)
            return EXIT_FAILURE
        except Exception as error:   # any rendering failure: leave no partial set
            out.discard()
            message = str(error).splitlines()[0] if str(error) else ""
            print(f"{PROG}: error: plotting failed: {type(error).__name__}: {shown(message)}",
                  file=sys.stderr)
            return EXIT_FAILURE
        except BaseException:
            out.discard()
            raise
    print(f"{PROG}: wrote {len(paths)} PNGs to {shown(args.out_dir)}: "
          + ", ".join(os.path.basename(p) for p in paths))
    return 0


def run():
    """The command (`python3 -m vrambench.plots`, vrambench-plots): main()
    with SIGINT, SIGTERM and SIGHUP ending it without a traceback, the
    staging folder removed (vrambench.output.run_main)."""
    run_main(main, PROG)
