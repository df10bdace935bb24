"""pytest plugin: GIL budgets for tests (registered through the pytest11 entry point)."""
