"""Started with every Python process of a guarded run (test_fork_safety puts this folder on PYTHONPATH): in the
runner's supervisor (`runner.cli`) and in the fork server units are forked from, any start of CUDA is written to
RUNNER_CUDA_GUARD_LOG, with the stack that asked, and refused. Processes forked from them (the units), and
processes started afresh (measuring), may start CUDA as they like: the check is on the process id it began with."""
import importlib.abc
import importlib.util
import os
import sys
import traceback

LOG = os.environ.get("RUNNER_CUDA_GUARD_LOG")
GUARDED = ("runner.cli", "multiprocessing.forkserver")  # the processes units are forked from, or run beside
STARTS = ("_cuda_init", "_cuda_getDeviceCount")  # torch's CUDA start, and the driver count that runs cuInit
PID = os.getpid()


def _refuse(name: str, original):
    def start(*args, **kwargs):
        if os.getpid() == PID:
            with open(LOG, "a") as log:
                log.write(f"pid {PID} ({' '.join(sys.orig_argv)[:200]}) called torch._C.{name}\n")
                log.write("".join(traceback.format_stack()) + "\n")
            raise RuntimeError(f"CUDA started in a parent process (torch._C.{name})")
        return original(*args, **kwargs)
    return start


class _Torch(importlib.abc.MetaPathFinder):
    """Finds torch as usual, then replaces its CUDA starts once it is loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            for name in STARTS:
                setattr(module._C, name, _refuse(name, getattr(module._C, name)))

        spec.loader.exec_module = exec_module
        return spec


if LOG and any(g in " ".join(sys.orig_argv) for g in GUARDED):
    sys.meta_path.insert(0, _Torch())
