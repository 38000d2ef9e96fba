"""A flow that holds its worker's lease for a few seconds and writes down which lease and when (for
test_deployment's test of disjoint leases)."""
import os
import time
from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from runner.common.atomic import write_json

HOLD_SECONDS = 3.0


@flow(name="hold")
def hold(out: str) -> None:
    started = time.time()
    time.sleep(HOLD_SECONDS)
    record = dict(gpus=os.environ.get("RUNNER_LEASE_GPUS"), cpus=os.environ.get("RUNNER_LEASE_CPUS"),
                  start=started, end=time.time())
    # whole or not at all: the test counts the files as they appear and reads them at once
    write_json(Path(out, f"{flow_run.id}.json"), record)
