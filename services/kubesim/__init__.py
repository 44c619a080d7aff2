"""The simulated Kubernetes cluster: the Kubernetes REST API plus a fake control plane (KWOK-style)."""

from services.kubesim.sim import KubeSim

__all__ = ["KubeSim"]
