"""OpenAI-compatible chat client, error classification, and test fakes."""
