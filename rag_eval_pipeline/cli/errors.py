"""The CLI's one error policy: bad input is one line on stderr, `error: <what to fix>`, and exit 2.

Commands raise `BadInput` for what they find wrong themselves; click raises UsageError/BadParameter
for a malformed command line; the domain reports bad input with ValueError (names, candidates,
settings, sheets, metrics), OSError (a missing or unreadable file) and the few errors below. `run`
prints them all the same way, so no command catches them. Anything else is a bug: it keeps its
traceback, and still exits 2, so a crashed `rag-eval gate` is never read as a regression (exit 1).
"""

from __future__ import annotations

import sys
import traceback

import click

EXIT_OK, EXIT_BLOCKED, EXIT_ERROR = 0, 1, 2  # done (or passed), blocked by a check or a regression, error

# Bad input the domain raises outside ValueError/OSError, by module and class name: looked up only
# when such an error happens, so that `rag-eval --help` never imports Dagster or the LLM client.
_DOMAIN_BAD_INPUT = (
    ("rag_eval_pipeline.instance", "InstanceConfigError"),  # an unusable Dagster instance config
    ("rag_eval_pipeline.core.llm.client", "LLMUnavailable"),  # the judge server did not answer
    ("rag_eval_pipeline.core.llm.client", "LLMMisconfigured"),  # the judge server refused the request
    ("sqlite3", "Error"),  # a cache path that is not a usable SQLite file (RAG_EVAL_WAREHOUSE, --cache)
)


# What only the production extra installs: a missing one is a setup to finish, not a bug.
PRODUCTION_EXTRA_MODULES = frozenset({"alembic", "redis", "s3fs", "upath", "celery", "dagster_celery"})


class BadInput(click.ClickException):
    """What the user gave cannot work; the message says what to fix."""

    exit_code = EXIT_ERROR


def run(command: click.Command, argv: list[str] | None) -> int:
    """Run the command line; its exit status. Bad input is reported here, in one line."""
    try:
        status = command.main(args=argv, prog_name="rag-eval", standalone_mode=False)
    except click.Abort:  # Ctrl-C
        _error("interrupted")
        return 130
    except click.ClickException as error:
        _error(error.format_message() + _help_hint(error))
        return error.exit_code
    except Exception as error:
        if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in PRODUCTION_EXTRA_MODULES:
            _error(f"{error}: production mode needs its extra: pip install 'rag_eval_pipeline[production]'")
            return EXIT_ERROR
        if not _is_bad_input(error):
            traceback.print_exc()
            _error(f"internal error {type(error).__name__}: {error} (a bug: please report it with the trace above)")
            return EXIT_ERROR
        _error(str(error))
        return EXIT_ERROR
    return status if isinstance(status, int) else EXIT_OK


def _is_bad_input(error: Exception) -> bool:
    if isinstance(error, (ValueError, OSError)):
        return True
    # A class whose module was never imported cannot have raised this error.
    kinds = [getattr(sys.modules.get(module), name, None) for module, name in _DOMAIN_BAD_INPUT]
    return any(kind is not None and isinstance(error, kind) for kind in kinds)


def _help_hint(error: click.ClickException) -> str:
    context = getattr(error, "ctx", None)  # set on usage errors
    return f" (see '{context.command_path} --help')" if context is not None else ""


def _error(message: str) -> None:
    """`error: ` and the message on one line, whatever line breaks the message holds."""
    one_line = " ".join(line.strip() for line in message.splitlines() if line.strip())
    click.echo(f"error: {one_line}", err=True)
