"""The oracle reference of bench/pollux_oracle.py on workloads small enough to follow by hand."""

from __future__ import annotations

from bench.pollux_oracle import oracle_average_jct
from services.simulator.workload import Workload, WorkloadJob


def _workload(*jobs: tuple[float, float, int]) -> Workload:
    return Workload(
        "hand",
        tuple(
            WorkloadJob(f"j{i}", submit, duration, gpus, "default") for i, (submit, duration, gpus) in enumerate(jobs)
        ),
    )


def test_a_lone_job_pays_its_restart_once() -> None:
    assert oracle_average_jct(_workload((0.0, 100.0, 1)), gpus=1, round_s=60.0, restart_s=30.0) == 130.0


def test_a_shorter_arrival_preempts_and_the_victim_pays_a_second_restart() -> None:
    # t=0 the long job starts (30 s restart, 30 s progress); t=60 the short one (submitted at 10) has less
    # left and takes the GPU: it ends at 60 + 30 + 50 = 140; the long one restarts at 180 and needs
    # 30 s of restart and the 970 s it had left: it ends at 1180
    jct = oracle_average_jct(_workload((0.0, 1000.0, 1), (10.0, 50.0, 1)), gpus=1, round_s=60.0, restart_s=30.0)
    assert jct == ((1180.0 - 0.0) + (140.0 - 10.0)) / 2


def test_gangs_take_whole_gpu_counts_and_smaller_work_goes_first() -> None:
    # 4 GPUs: a 4-GPU gang of 100 s and a 1-GPU job of 300 s (300 GPU-s < 400 GPU-s) arrive together; the
    # small one goes first and the gang waits for 4 free GPUs, which it finds only after the small one ends
    jct = oracle_average_jct(_workload((0.0, 100.0, 4), (0.0, 300.0, 1)), gpus=4, round_s=60.0, restart_s=0.0)
    assert jct == (300.0 + 400.0) / 2
