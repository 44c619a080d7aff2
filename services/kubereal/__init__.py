"""A real Kubernetes control plane on this machine, built from Go modules: the truth kubesim is
checked against, a test tier, and ``muster up --kube real``."""
