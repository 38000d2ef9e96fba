"""tests/pace.py: the machine's pace the time-bound tests stretch their limits by."""
import os

import pytest

import pace


def test_the_pace_is_the_import_over_the_reference_machines_within_its_bounds():
    assert pace.pace_of(pace.REFERENCE_IMPORT_SECONDS) == 1.0
    assert pace.pace_of(2 * pace.REFERENCE_IMPORT_SECONDS) == 2.0
    assert pace.pace_of(0.5 * pace.REFERENCE_IMPORT_SECONDS) == 1.0  # a faster machine keeps the limits as set
    assert pace.pace_of(100 * pace.REFERENCE_IMPORT_SECONDS) == pace.MAX_PACE


def test_a_pace_given_in_the_environment_is_kept_and_stretches_limits(monkeypatch):
    monkeypatch.setenv(pace.VARIABLE, "1.5")
    monkeypatch.setattr(pace, "import_cpu_seconds", lambda cores: pytest.fail("measured a pace that was given"))
    pace.settle()
    assert pace.pace() == 1.5 and pace.paced(20) == 30.0


def test_the_session_measured_its_pace_before_the_tests_ran():
    """Set by the process that started the workers (or this one), for every worker and the runs they start."""
    assert 1.0 <= float(os.environ[pace.VARIABLE]) <= pace.MAX_PACE


def test_the_least_of_the_readings_is_the_pace(monkeypatch):
    """Another process busy on one core that moment slows the import there, not the machine."""
    monkeypatch.delenv(pace.VARIABLE)
    monkeypatch.setattr(pace, "import_cpu_seconds", lambda cores: [2.5 * pace.REFERENCE_IMPORT_SECONDS,
                                                                   1.5 * pace.REFERENCE_IMPORT_SECONDS][:len(cores)])
    pace.settle()
    expected = 1.5 if len(os.sched_getaffinity(0)) >= 2 else 2.5
    assert pace.pace() == expected and os.environ[pace.VARIABLE] == str(expected)  # for every process started after


def test_each_reading_is_a_fresh_interpreter_pinned_to_its_own_core(monkeypatch):
    cores = sorted(os.sched_getaffinity(0))[:pace.READINGS]
    monkeypatch.setattr(pace, "IMPORTS", "assert len(os.sched_getaffinity(0)) == 1; import json")
    seconds = pace.import_cpu_seconds(cores)
    assert len(seconds) == len(cores) and all(0 < s < 30 for s in seconds)


def test_an_import_that_fails_is_an_error_that_says_how_to_skip_it(monkeypatch):
    monkeypatch.setattr(pace, "IMPORTS", "import no_such_module_anywhere")
    with pytest.raises(RuntimeError, match=f"set {pace.VARIABLE}"):
        pace.import_cpu_seconds(sorted(os.sched_getaffinity(0))[:1])
