"""The reporting domain: a candidate's scores compared with the tenant's baseline, the verdict, the
regression report (Markdown, HTML, JUnit XML), and the baselines with their promotion history, in files
or in the results database. The plain modules know nothing of Dagster; `assets.py`, `checks.py` (the
blocking gate) and `definitions.py` are its Dagster layer."""
