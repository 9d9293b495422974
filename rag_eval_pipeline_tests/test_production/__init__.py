"""Production mode on real services: the lineage with its results in Postgres and its tables in an
object store, its errors and faults, and baselines and versions kept in the results database."""
