"""The OpenAI-compatible client and its content-addressed call cache."""
