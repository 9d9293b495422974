"""Keep `rag-eval` stoppable when the shell that started it ignores SIGINT.

Every in-process Dagster execution, on leaving, sets SIGTERM's handler to SIGINT's (so a container's
SIGTERM acts as Ctrl-C). A shell that starts a job in the background (`rag-eval gate ... &` in a CI
script) hands it SIGINT ignored, so after its first Dagster run the process, and every child it starts
later, ignore SIGTERM too: a cancelled CI job, a pool's terminate or a `timeout` no longer stop them.
"""

from __future__ import annotations

import signal


def stay_stoppable() -> None:
    """Give SIGINT Python's own handler when it was inherited ignored (call on the main thread, first)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
