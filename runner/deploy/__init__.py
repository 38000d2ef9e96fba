"""Launching runs: the local and docker backends and the leases workers hold on a shared node."""
