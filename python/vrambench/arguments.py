"""The options of vrambench's Python commands (torch2trace, the plots, the
report page), parsed as the C commands parse theirs: a bad option or value
is one line on stderr and exit status 2, with the nearest option offered
for a misspelt one, never argparse's usage line first."""

import argparse
import difflib


def did_you_mean(given, names):
    """'; did you mean NAME?' for the one of `names` closest to `given` (as
    the C commands' vb_did_you_mean offers one), else ''."""
    close = difflib.get_close_matches(given, list(names), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _printable(text):
    """`text` with control characters shown as '?', as the C commands show them."""
    return "".join(c if c.isprintable() else "?" for c in text)


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are one line, and which takes an
    option by its whole name only, as the C commands do: argparse's own took
    '--no-plot' for --no-plots, which `vrambench report` refuses."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, after refusing an option that takes a value given
        twice, as the C commands do ("--out given twice"): argparse keeps
        the last one without a word. A flag given twice is that flag, and
        an option that adds each value (action="append") takes them all."""
        import sys
        words = list(sys.argv[1:] if args is None else args)
        seen = set()
        for word in words:
            if word == "--":
                break
            if not word.startswith("-") or word == "-":
                continue
            name = word.split("=", 1)[0]
            action = self._option_string_actions.get(name)
            if action is None or action.nargs == 0 or isinstance(action, argparse._AppendAction):
                continue
            if action.dest in seen:
                self.error(f"{action.option_strings[-1]} given twice")
            seen.add(action.dest)
        return super().parse_known_args(words, namespace)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {_printable(message)}{self._nearest(message)} "
                     f"({self.prog} --help lists the options)\n")

    def _nearest(self, message):
        """'; did you mean --X?' for an unknown option close to one of ours, else ''."""
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return ""
        given = message[len(prefix):].split(" ")[0].split("=")[0]
        if not given.startswith("--"):
            return ""
        return did_you_mean(given, [name for action in self._actions for name in action.option_strings
                                    if name.startswith("--")])
