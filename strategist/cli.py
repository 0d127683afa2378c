"""``strategist`` command line: a thin shell over the library API.

Every user mistake ends as one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys

from .errors import StrategistError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strategist",
        description="Sharding-propagation strategy advisor for MindSpore.")
    sub = p.add_subparsers(dest="command", required=True)

    def model_args(sp):
        sp.add_argument("model", help="path/to/model.py:NAME (a Cell class or a factory function)")
        sp.add_argument("--input", action="append", metavar="NAME:DTYPE[d0,...]",
                        help="a construct() input, e.g. ids:int32[2,4096]; repeat per input "
                             "(default: the model's example_inputs)")
        sp.add_argument("--kwargs", nargs="*", action="extend", metavar="KEY=VALUE",
                        help="arguments for the Cell class or factory, e.g. layers=2")

    sp = sub.add_parser("inspect", help="walk the model's graph: ops by type, parameters, cell tree")
    model_args(sp)
    sp.add_argument("--json", action="store_true", help="print the full graph as JSON")
    sp.add_argument("--depth", type=int, default=3, help="cell tree depth to print (default 3)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``strategist`` console script."""
    parser = _parser()
    # argparse's own errors already print one usage line and exit 2.
    args = parser.parse_args(argv)
    os.environ.setdefault("GLOG_v", "4")  # MindSpore's C++ log: only critical; we report errors ourselves
    try:
        if args.command == "inspect":
            from .loader import load_graph
            from .report import inspect_text
            graph = load_graph(args.model, args.input, args.kwargs)
            sys.stdout.write(graph.to_json() + "\n" if args.json else inspect_text(graph, args.depth))
        return 0
    except StrategistError as err:
        print(f"strategist: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("strategist: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
