"""A `rag-eval` process started before its command is known, so a gate does not wait for its imports.

The service starts a few of these ahead of time (commands.py). Each imports what a gate needs (Dagster,
the asset definitions, pandas: seconds of CPU), then reads one request, `{"argv": [...]}`, on its
standard input, runs that one command exactly as the console script would, and exits. A child never
runs a second command, so nothing of one tenant's command stays in a process that serves another. An
empty standard input (the service stopped) ends it without running anything.
"""

import json
import sys


def main() -> int:
    # What a gate imports when it starts; importing them here is the whole point of a warm child.
    import rag_eval_pipeline.cli.launch
    import rag_eval_pipeline.definitions  # noqa: F401
    from rag_eval_pipeline.cli import main as rag_eval

    line = sys.stdin.readline()
    if not line.strip():
        return 0
    return rag_eval(json.loads(line)["argv"])


if __name__ == "__main__":
    sys.exit(main())
