"""tests/pace.py: the machine's pace the time-bound tests stretch their limits by."""
import pace


def test_the_pace_is_the_import_over_the_reference_machines_within_its_bounds():
    assert pace.pace_of(pace.REFERENCE_IMPORT_SECONDS) == 1.0
    assert pace.pace_of(2 * pace.REFERENCE_IMPORT_SECONDS) == 2.0
    assert pace.pace_of(0.5 * pace.REFERENCE_IMPORT_SECONDS) == 1.0  # a faster machine keeps the limits as set
    assert pace.pace_of(100 * pace.REFERENCE_IMPORT_SECONDS) == pace.MAX_PACE


def test_a_pace_given_in_the_environment_is_kept_and_stretches_limits(monkeypatch):
    monkeypatch.setenv(pace.VARIABLE, "1.5")
    pace.settle()
    assert pace.pace() == 1.5 and pace.paced(20) == 30.0


def test_the_session_measured_its_pace_before_the_tests_ran():
    """Set by the process that started the workers (or this one), for every worker and the runs they start."""
    import os

    assert 1.0 <= float(os.environ[pace.VARIABLE]) <= pace.MAX_PACE


def test_a_process_started_while_the_pace_is_measured_waits_for_it_and_keeps_it(tmp_path, monkeypatch):
    import os
    import threading

    file = tmp_path / "pace"
    monkeypatch.delenv(pace.VARIABLE)
    monkeypatch.setenv(pace.FILE_VARIABLE, str(file))
    assert not pace.known()
    written = tmp_path / "pace.tmp"
    written.write_text("2.25")
    threading.Timer(0.3, written.rename, (file,)).start()  # whole, as the measuring writes it
    assert pace.pace() == 2.25 and os.environ[pace.VARIABLE] == "2.25"  # for every process it starts from then on
    assert pace.known() and pace.paced(10) == 22.5


def test_a_pace_never_written_is_an_error_naming_its_file(tmp_path, monkeypatch):
    import pytest

    monkeypatch.delenv(pace.VARIABLE)
    monkeypatch.setenv(pace.FILE_VARIABLE, str(tmp_path / "never"))
    monkeypatch.setattr(pace, "WAIT_SECONDS", 0.2)
    with pytest.raises(RuntimeError, match=str(tmp_path / "never")):
        pace.pace()
