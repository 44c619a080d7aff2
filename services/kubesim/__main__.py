"""``python -m services.kubesim``."""

from services.kubesim.cli import kubesim

if __name__ == "__main__":
    kubesim(prog_name="python -m services.kubesim")
