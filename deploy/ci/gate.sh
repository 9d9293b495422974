#!/bin/sh
# The rag-eval gate for Jenkins or any CI that runs a shell: gates one commit's answers, prints one line
# saying what the exit status means, and exits with the gate's own status. It leaves the verdict per metric
# as JUnit XML (GATE_JUNIT, default gate-junit.xml) for the CI to collect. Copy it into the repository of
# the RAG system under test; it needs only a POSIX sh and `rag-eval` on PATH.
#
#   GATE_TENANT       the tenant                                    (required)
#   GATE_COMMIT       the commit under test                         (required; Jenkins: $GIT_COMMIT)
#   GATE_OUTPUTS      the answers to `rag-eval questions`, one      (required)
#                     {"qa_id", "answer", "contexts": [{"id", "text"}, ...]} a line
#   GATE_BRANCH       the commit's branch                           (required; Jenkins: $BRANCH_NAME)
#   GATE_MAIN_BRANCH  the followed branch, whose passes become the baseline (default: main)
#   GATE_JUNIT        where to write the JUnit XML                  (default: gate-junit.xml)
# Arguments are passed on to `rag-eval gate` (e.g. --tolerance 0.03). With RAG_EVAL_SERVER and RAG_EVAL_TOKEN
# set, the gate runs on the gate service (docs/service.md); without them, on this machine.
#
#   exit 0  pass (or, on the followed branch with no baseline yet, this commit became the baseline)
#   exit 1  a regression: blocked
#   exit 2  the gate cannot decide (a metric measured on too few items, no baseline yet, nothing scored) or
#           an error of the gate: blocked, never a pass
#   other   an error (3: a required variable is unset; 127: rag-eval is not on PATH): blocked
#
# A Jenkinsfile stage (declarative pipeline):
#
#   stage('rag-eval gate') {
#     environment {
#       RAG_EVAL_SERVER = 'https://rag-eval.internal:8765'
#       RAG_EVAL_TOKEN = credentials('rag-eval-token')      // a secret text: `rag-eval token issue ...`
#       GATE_TENANT = 'acme'
#       GATE_COMMIT = "${env.GIT_COMMIT}"
#       GATE_BRANCH = "${env.BRANCH_NAME}"
#       GATE_OUTPUTS = 'outputs.jsonl'
#     }
#     steps {
#       sh 'rag-eval questions --tenant "$GATE_TENANT" --out questions.jsonl'
#       sh 'python -m my_rag.answer questions.jsonl > outputs.jsonl'   // the RAG system, at this commit
#       sh 'sh deploy/ci/gate.sh'
#     }
#     post { always { junit allowEmptyResults: true, testResults: 'gate-junit.xml' } }
#   }
set -eu

# Each check in a subshell: an unset variable ends sh with 2 and bash with 1, which would read as a verdict.
( : "${GATE_TENANT:?set GATE_TENANT to the tenant to gate, e.g. acme}" ) || exit 3
( : "${GATE_COMMIT:?set GATE_COMMIT to the commit under test (Jenkins: \$GIT_COMMIT)}" ) || exit 3
( : "${GATE_OUTPUTS:?set GATE_OUTPUTS to the answers file (one JSON object a line, from rag-eval questions)}" ) || exit 3
( : "${GATE_BRANCH:?set GATE_BRANCH to the branch of the commit (Jenkins: \$BRANCH_NAME)}" ) || exit 3
junit="${GATE_JUNIT:-gate-junit.xml}"

# A JUnit file left by an earlier build in the same workspace must not be collected as this one's.
rm -f "$junit"

status=0
rag-eval gate --tenant "$GATE_TENANT" --candidate "$GATE_COMMIT" --outputs "$GATE_OUTPUTS" \
    --branch "$GATE_BRANCH" --main-branch "${GATE_MAIN_BRANCH:-main}" --junit "$junit" "$@" || status=$?

case "$status" in
    0) echo "rag-eval gate: PASS ($GATE_TENANT at $GATE_COMMIT)" ;;
    1) echo "rag-eval gate: REGRESSION: blocked ($GATE_TENANT at $GATE_COMMIT; the failing metrics are above)" ;;
    2) echo "rag-eval gate: CANNOT DECIDE: blocked, not a pass ($GATE_TENANT at $GATE_COMMIT; the reason is above)" ;;
    127) echo "rag-eval gate: ERROR: rag-eval is not on PATH: blocked" ;;
    *) echo "rag-eval gate: ERROR (exit $status): blocked" ;;
esac
exit "$status"
