"""A `rag-eval` process started before its command is known, so a gate does not wait for its imports.

The service starts a few of these ahead of time (commands.py). Each imports what a gate needs (Dagster,
the asset definitions, pandas: seconds of CPU), then reads one request, `{"argv": [...]}`, on its
standard input, runs that one command exactly as the console script would, and exits. A child never
runs a second command, so nothing of one tenant's command stays in a process that serves another. An
empty standard input (the service stopped) ends it without running anything.
"""

import contextlib
import json
import sys


def main() -> int:
    # What a gate imports when it starts; importing them here is the whole point of a warm child. Dagster
    # imports its storage's migrations (alembic) and pandas only once a run starts: those too. The
    # embedding runtime is the operator's model, the same for every tenant: loaded here as well.
    import alembic.command  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import rag_eval_pipeline.cli.launch
    import rag_eval_pipeline.definitions  # noqa: F401
    from rag_eval_pipeline import settings
    from rag_eval_pipeline.cli import main as rag_eval
    from rag_eval_pipeline.core.minilm import shared_model

    # Weights not installed, or a setting that cannot work: the command that needs them says so.
    with contextlib.suppress(OSError, settings.SettingsError):
        shared_model(settings.load().embedding_precision)

    line = sys.stdin.readline()
    if not line.strip():
        return 0
    return rag_eval(json.loads(line)["argv"])


if __name__ == "__main__":
    sys.exit(main())
