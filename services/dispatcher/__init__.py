"""The dispatcher: turns one cluster's admit / preempt / scale decisions into Kubernetes Jobs, idempotently."""
