"""A flow that holds its worker's lease for a few seconds and writes down which lease and when (for
test_deployment's test of disjoint leases)."""
import json
import os
import time
from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

HOLD_SECONDS = 3.0


@flow(name="hold")
def hold(out: str) -> None:
    started = time.time()
    time.sleep(HOLD_SECONDS)
    record = dict(gpus=os.environ.get("RUNNER_LEASE_GPUS"), cpus=os.environ.get("RUNNER_LEASE_CPUS"),
                  start=started, end=time.time())
    Path(out, f"{flow_run.id}.json").write_text(json.dumps(record))
