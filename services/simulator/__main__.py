"""``python -m services.simulator``: the ``muster sim`` command."""

from services.simulator.cli import sim

if __name__ == "__main__":
    sim()
