"""The results database of production mode (Postgres, schema `rag_eval`): its tables, connections whose
every transaction is scoped to one tenant by row-level security, the results store, and the alembic
migrations that `rag-eval db upgrade` runs."""
