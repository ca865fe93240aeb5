"""Opening models: loading on a worker thread, the recent list, memory estimates, the dialogs."""
