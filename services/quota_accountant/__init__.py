"""The quota accountant: the usage ledger (allocation, decayed GPU time, budgets, chargeback records)."""
