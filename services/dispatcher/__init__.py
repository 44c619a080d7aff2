"""dispatcher."""
