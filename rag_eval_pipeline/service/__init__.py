"""The gate service: the HTTP door tenants' CI jobs use with a token (`rag-eval serve`), and its tokens."""
