"""A shell that starts the tool or the suite in the background ignores SIGINT for it; SIGTERM must
still stop it and the processes it starts after a Dagster run (cli/signals.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.dagster]

# After one in-process Dagster run, can SIGTERM stop a child this process starts? Prints how the child ended.
AFTER_A_DAGSTER_RUN = """
import json, signal, subprocess, sys
import dagster as dg
from rag_eval_pipeline.cli.signals import stay_stoppable

if sys.argv[1] == "stay_stoppable":
    stay_stoppable()

@dg.asset
def one() -> int:
    return 1

assert dg.materialize([one]).success
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
child.send_signal(signal.SIGTERM)
try:  # a child that takes SIGTERM ends at once; one that ignores it sleeps on: 10 s tell the two apart
    code = child.wait(timeout=10)
except subprocess.TimeoutExpired:
    child.kill()
    code = "survived SIGTERM"
print(json.dumps({"child": code}))
"""


def _started_with_sigint_ignored(*args: str) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", *args],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `command &` in a script
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_after_a_dagster_run_sigterm_still_stops_the_children_started_later():
    assert _started_with_sigint_ignored(AFTER_A_DAGSTER_RUN, "as_inherited") == {"child": "survived SIGTERM"}
    assert _started_with_sigint_ignored(AFTER_A_DAGSTER_RUN, "stay_stoppable") == {"child": -signal.SIGTERM}


def test_rag_eval_takes_sigint_back_before_any_command():
    probe = (
        "import json, signal; from rag_eval_pipeline import cli\n"
        "code = cli.main(['--help'])\n"
        "print(json.dumps({'code': code, 'sigint_ignored': signal.getsignal(signal.SIGINT) is signal.SIG_IGN}))"
    )
    assert _started_with_sigint_ignored(probe) == {"code": 0, "sigint_ignored": False}
