"""Model providers: the Messages API through `anthropic`, OpenAI-compatible chat through `openai`, and the
lazy adapter the app starts with. The only package that imports either SDK."""
