"""Errors a user can act on. Each message names the file or field at fault."""


class RunnerError(Exception):
    """A problem with the user's input or environment, explained in one message (no traceback needed)."""


class SpecError(RunnerError):
    """A competition id or spec that cannot be resolved."""


class InputError(RunnerError):
    """A data file that is missing, unreadable or malformed."""


class InvalidSubmissionError(RunnerError):
    """A submission that MLE-bench's grader would reject."""


class Interrupted(Exception):
    """The run was asked to stop (SIGTERM, as Docker and Prefect send first): it ends cleanly, keeping its last
    valid submission and what its folds finished for a later run in the same folder."""

    def __init__(self, signal_number: int):
        super().__init__(f"stopped by signal {signal_number}")
        self.signal_number = signal_number
