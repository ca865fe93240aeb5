"""Remote backends: any OpenAI-compatible endpoint (a base URL, an optional API key kept in the OS keyring), whose
models the chat drives like local ones."""
