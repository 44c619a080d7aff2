"""quota_accountant."""
