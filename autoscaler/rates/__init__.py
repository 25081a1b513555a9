"""Rate sources: where each workload's current request rate comes from."""
