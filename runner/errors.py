"""Errors a user can act on. Each message names the file or field at fault."""


class RunnerError(Exception):
    """A problem with the user's input or environment, explained in one message (no traceback needed)."""


class SpecError(RunnerError):
    """A competition id or spec that cannot be resolved."""


class InputError(RunnerError):
    """A data file that is missing, unreadable or malformed."""


class InvalidSubmissionError(RunnerError):
    """A submission that MLE-bench's grader would reject."""
