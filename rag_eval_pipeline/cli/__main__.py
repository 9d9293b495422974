"""`python -m rag_eval_pipeline.cli`, the same as `rag-eval`."""

from rag_eval_pipeline.cli import main

raise SystemExit(main())
