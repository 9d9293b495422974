"""How `rag-eval` subcommands report bad input: one clear line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys


def exit_2_on_bad_input(handler):
    """Bad input (ValueError, FileNotFoundError) ends in one line on stderr and exit 2, not a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (ValueError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2

    return run
