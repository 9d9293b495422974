"""Local LLM serving: a llama.cpp OpenAI-compatible server started by the project itself."""
