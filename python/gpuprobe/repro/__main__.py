"""``python -m gpuprobe.repro --result RESULT.json --plan PLAN.json --out DIR``.

Exit 0: ``DIR/repro.py`` and ``DIR/repro.json`` written. Exit 2: a usage error or unusable
input (one line on stderr). Exit 3: ``no repro: WHY`` (this result cannot be rebuilt).
"""

from __future__ import annotations

import argparse
import sys

from gpuprobe.repro.families import NoRepro
from gpuprobe.repro.generate import ReproInputError, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuprobe.repro", description=__doc__.splitlines()[0])
    parser.add_argument("--result", required=True, help="one element of report.json's results")
    parser.add_argument("--plan", required=True, help="the run directory's plan.json")
    parser.add_argument("--out", required=True, help="directory to write repro.py and repro.json into")
    args = parser.parse_args(argv)
    try:
        target = write(args.result, args.plan, args.out)
    except NoRepro as exc:
        print(f"no repro: {exc}", file=sys.stderr)
        return 3
    except ReproInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a recipe's own failure is reported, not raised
        # One line, as for every other outcome: the caller shows it beside the result.
        print(f"no repro: the {type(exc).__name__} of the generator: {exc}", file=sys.stderr)
        return 3
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
