"""Row-level security as the pipeline meets it: through `ResultsDatabase.tenant(...)` as rag_eval_app,
a tenant reads, changes and writes only its own rows, on every table; with no tenant set, nothing."""

import pytest
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.exc import ProgrammingError

from rag_eval_pipeline.core.names import PartitionNameError
from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.connection import ResultsDatabase
from rag_eval_pipeline_tests.support.postgres import run_admin, sample_row

pytestmark = [pytest.mark.postgres]

REFUSED = "violates row-level security policy"


def _admin_rows(database, table, *tenants) -> list[tuple]:
    """The tenants' rows as the superuser sees them (it bypasses the policies)."""
    return run_admin(
        f"select tenant_id, created_at from {schema.SCHEMA}.{table.name} "
        "where tenant_id = any(:tenants) order by tenant_id",
        database.admin_url,
        tenants=list(tenants),
    )


@pytest.mark.parametrize("table", schema.TENANT_TABLES, ids=lambda table: table.name)
def test_a_tenant_reads_changes_and_writes_only_its_own_rows(app_database, upgraded_database, table):
    a, b = f"a-{table.name}", f"b-{table.name}"
    for tenant in (a, b):
        with app_database.tenant(tenant) as connection:
            connection.execute(insert(table).values(sample_row(table, tenant, 1)))
    before = _admin_rows(upgraded_database, table, a, b)
    assert [row[0] for row in before] == [a, b]

    with app_database.tenant(a) as connection:
        assert connection.execute(select(table.c.tenant_id)).scalars().all() == [a]
        assert connection.execute(select(func.count()).select_from(table).where(table.c.tenant_id == b)).scalar() == 0
        assert (
            connection.execute(update(table).where(table.c.tenant_id == b).values(created_at=func.now())).rowcount == 0
        )
        assert connection.execute(delete(table).where(table.c.tenant_id == b)).rowcount == 0
    with pytest.raises(ProgrammingError, match=REFUSED):
        with app_database.tenant(a) as connection:
            connection.execute(insert(table).values(sample_row(table, b, 2)))
    with pytest.raises(ProgrammingError, match=REFUSED):  # nor hand its own row to another tenant
        with app_database.tenant(a) as connection:
            connection.execute(update(table).values(tenant_id=b))
    assert _admin_rows(upgraded_database, table, a, b) == before

    with app_database.tenant(a) as connection:  # a statement without any WHERE still stops at the tenant
        assert connection.execute(delete(table)).rowcount == 1
    assert _admin_rows(upgraded_database, table, a, b) == before[1:]


def test_without_a_tenant_a_connection_sees_nothing_and_writes_nothing(app_database, upgraded_database):
    table = schema.audited_archives
    with app_database.tenant("someone") as connection:
        connection.execute(insert(table).values(sample_row(table, "someone", 7)))
    with app_database.engine.connect() as connection:  # the app role, no setting
        assert connection.execute(select(func.count()).select_from(table)).scalar() == 0
        with pytest.raises(ProgrammingError, match=REFUSED):
            connection.execute(insert(table).values(sample_row(table, "someone", 8)))
        connection.rollback()
        connection.execute(text("select set_config('rag_eval.tenant', '', true)"))  # empty is no tenant too
        assert connection.execute(select(func.count()).select_from(table)).scalar() == 0
    assert len(_admin_rows(upgraded_database, table, "someone")) == 1


def test_a_pooled_connection_carries_no_tenant_into_the_next_transaction(upgraded_database):
    database = ResultsDatabase(upgraded_database.app_url, pool_size=1, max_overflow=0)  # one connection, reused
    table = schema.test_parameters
    try:
        with database.tenant("pool-a") as connection:
            connection.execute(insert(table).values(sample_row(table, "pool-a", 1)))
            backend = connection.execute(text("select pg_backend_pid()")).scalar()
        with pytest.raises(RuntimeError):  # a transaction that fails leaves no tenant behind either
            with database.tenant("pool-a") as connection:
                raise RuntimeError("the caller failed")
        with database.engine.connect() as connection:
            assert connection.execute(text("select pg_backend_pid()")).scalar() == backend
            assert connection.execute(text("select current_setting('rag_eval.tenant', true)")).scalar() in ("", None)
            assert connection.execute(select(func.count()).select_from(table)).scalar() == 0
        with database.tenant("pool-b") as connection:
            assert connection.execute(text("select pg_backend_pid()")).scalar() == backend
            assert connection.execute(select(table.c.tenant_id)).scalars().all() == []
        with database.tenant("pool-a") as connection:
            assert connection.execute(select(table.c.tenant_id)).scalars().all() == ["pool-a"]
    finally:
        database.dispose()


def test_the_block_commits_on_success_and_rolls_back_on_error(app_database):
    table = schema.golden_manifests
    with pytest.raises(KeyError):
        with app_database.tenant("atomic") as connection:
            connection.execute(insert(table).values(sample_row(table, "atomic", 1)))
            raise KeyError("after the write")
    with app_database.tenant("atomic") as connection:
        assert connection.execute(select(func.count()).select_from(table)).scalar() == 0
        connection.execute(insert(table).values(sample_row(table, "atomic", 2)))
    with app_database.tenant("atomic") as connection:
        assert connection.execute(select(table.c.dataset_version)).scalars().all() == ["dataset_version-2"]


@pytest.mark.parametrize("tenant", ["", "Upper", "a b", "x" * 64, "a'; drop table x; --"])
def test_a_malformed_tenant_is_refused(app_database, tenant):
    with pytest.raises(PartitionNameError, match="invalid tenant name"):
        with app_database.tenant(tenant):
            pass
