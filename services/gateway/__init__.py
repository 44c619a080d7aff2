"""The gateway: HTTP API (auth, tenancy, validation, idempotent submission), status view, kube-native submissions."""
