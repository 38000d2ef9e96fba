"""How a run used its card: the busy share of the training window from the monitor's NVML samples, the seconds GPU
units held the card and its folds trained on it, each GPU member's speed; computed from hand-made samples and
records, and a run without a card says nothing of one (None, not zeros)."""
import json
import time

import pytest

from runner.common.budget import Budget
from runner.console import summary_table
from runner.machine.hardware import GiB, Gpu, Hardware
from runner.machine.monitor import read_samples
from runner.results.card_usage import card_usage, member_speed, training_span, union_seconds
from runner.results.report import RunReport
from runner.supervisor import run_competition

WINDOW = (0.0, 100.0)


def samples(util_at) -> list[dict]:
    """One monitor sample a second over the window, card 0's utilisation `util_at(t)`."""
    return [dict(t=float(t), cpu=0.0, rss=0, gpus=[dict(used=1, total=2, util=util_at(t))]) for t in range(100)]


def unit(member, fold, start, end, lane="gpu 0"):
    return dict(member=member, fold=fold, lane=lane, start=start, end=end, status="completed", score=None, threads=4)


def epoch(member, fold, number, seconds, per_second):
    return dict(member=member, fold=fold, epoch=number, seconds=seconds, epoch_seconds=seconds,
                images_per_second=per_second, loss=1.0, score=1.0, data_wait=0.0)


# the dog-breed run on an H200 in small: embeddings on the card, then two CNN folds side by side, each paying a
# long start-up before its epochs; one completes (30 s of training, 5 s of prediction), the other is killed after
# two epochs, its manifest never written
UNITS = (unit("features", -1, 10.0, 20.0), unit("cnn", 0, 20.0, 80.0), unit("cnn", 1, 20.0, 60.0),
         unit("lightgbm", 0, 20.0, 90.0, lane="cpu 0"))
FOLDS = (dict(member="cnn", fold=0, status="completed", train_seconds=30.0, predict_seconds=5.0),
         dict(member="cnn", fold=1, status="failed", train_seconds=0.0, predict_seconds=0.0))
EPOCHS = (epoch("cnn", 0, 1, 4.0, 500.0), epoch("cnn", 0, 2, 2.0, 1000.0), epoch("cnn", 0, 3, 2.0, 1200.0),
          epoch("cnn", 1, 1, 5.0, 400.0), epoch("cnn", 1, 2, 5.0, 900.0),
          epoch("text", 0, 1, 3.0, 50.0) | {"rows_per_second": 50.0})
MEMBERS = (dict(name="cnn", slot="gpu"), dict(name="features", slot="cpu"), dict(name="lightgbm", slot="cpu"),
           dict(name="text", slot="cpu"))


def test_spans_side_by_side_count_once_and_only_within_the_window():
    assert union_seconds([(20.0, 80.0), (20.0, 60.0), (10.0, 20.0)], WINDOW) == 70.0
    assert union_seconds([(90.0, 130.0), (-5.0, 5.0)], WINDOW) == 15.0
    assert union_seconds([], WINDOW) == 0.0


def test_a_folds_training_is_its_epochs_before_its_prediction_not_its_start_up():
    completed = training_span(UNITS[1], FOLDS[0], [])
    assert completed == (45.0, 75.0)  # 20-45 s its start-up, 75-80 s its prediction
    killed = training_span(UNITS[2], FOLDS[1], [e for e in EPOCHS if e["member"] == "cnn" and e["fold"] == 1])
    assert killed == (50.0, 60.0)  # two epoch lines of 5 s, up to its kill


def test_the_card_figures_of_a_run_from_its_records_and_samples():
    trained = samples(lambda t: 80 if 45 <= t < 75 else 0)
    usage = card_usage(1, WINDOW, UNITS, FOLDS, EPOCHS, MEMBERS, trained)
    [card] = usage.cards
    assert card.busy_share == pytest.approx(30 * 0.8 / 100) and card.samples == 100
    assert card.held_seconds == 70.0 and card.training_seconds == 30.0  # held 10-80 s, trained 45-75 s
    assert card.held_share == pytest.approx(0.7) and card.training_share == pytest.approx(0.3)
    [cnn] = usage.members  # GPU members only: the text member trained on the CPU
    # after each fold's first epoch: (1000 x 2 + 1200 x 2 + 900 x 5) images over 9 s
    assert cnn.member == "cnn" and cnn.unit == "images" and cnn.per_second == pytest.approx(988.9, abs=0.1)
    assert cnn.epochs == 3 and not cnn.warm_up_included
    assert cnn.bare_loop_per_second is None  # the run was given no bare-loop measurement
    said = usage.say()
    assert said[0] == "card 0: busy 24%, held by units 70%, training 30% (30 s) of the 100 s training window"
    assert said[1] == "cnn: 989 img/s over 3 epochs (bare loop unknown)"
    again = RunReport.from_json(RunReport("c", "trained", "accuracy", False, 100, 90, "s.csv", "x",
                                          card_usage=usage).to_json())
    assert again.card_usage == usage  # report.json round-trips it


def test_a_member_whose_folds_never_passed_their_first_epoch_is_timed_on_it_and_says_so():
    first = [epoch("cnn", 0, 1, 4.0, 500.0), epoch("cnn", 1, 1, 4.0, 700.0)]
    speed = member_speed("cnn", first)
    assert speed.per_second == 600.0 and speed.warm_up_included
    assert member_speed("cnn", []) is None  # no epoch: no speed, not 0


def test_a_run_without_a_card_has_no_card_figures():
    assert card_usage(0, WINDOW, UNITS, FOLDS, EPOCHS, MEMBERS, samples(lambda t: 0)) is None


@pytest.mark.parametrize("cards", [0, 1])
def test_a_whole_run_reports_its_card_figures_only_where_it_has_a_card(spaceship, tmp_path, cards):
    """A CPU run's report has no card figures; a run given a card (as data: this machine has none, so NVML gives
    no utilisation) reports the card's share as unknown and the seconds its folds held it, here none, in
    report.json, the console summary and the run page."""
    from flows.compete import run_summary

    gpus = (Gpu("A100-SXM4-40GB", 40 * GiB, 40 * GiB, (8, 0)),) * cards
    hardware = Hardware(gpus=gpus, cpus=1, ram_bytes=8 * GiB, shm_bytes=GiB, disk_free_bytes=50 * GiB)
    out = tmp_path / "out"
    midway = []  # report.json as the run went, and the units running then

    def seen(_report, running):
        midway.append((json.loads((out / "report.json").read_text()), {(r.unit.member.name, r.unit.fold)
                                                                        for r in running}))

    report = run_competition("spaceship", spaceship / "prepared" / "public", Budget.start(8), out,
                             hardware=hardware, engines=["linear"], on_status=seen)
    saved = json.loads((out / "report.json").read_text())
    # every fold it lists has its unit, those ended and those running named as such
    assert all({(f["member"], f["fold"]) for f in r["folds"]} <= {(u["member"], u["fold"]) for u in r["units"]}
               for r, _ in midway)
    named = [({(u["member"], u["fold"]) for u in r["units"] if u["status"] == "running"}, running)
             for r, running in midway]
    # (on a core shared with another process the window may close before a status call finds a unit running: then
    # nothing is named running, as nothing is)
    assert all(said == running for said, running in named), named
    assert all(u["status"] != "running" for u in saved["units"])  # at the end every unit has ended
    caption = str(summary_table(report).caption)
    page = run_summary(report, None, dict(backend="local", killed_at_deadline=False), out / "submission.csv")
    assert read_samples(out / "monitor.jsonl")[0]["t"] < report.timings["planned"]  # sampled before training
    if not cards:
        assert saved["card_usage"] is None and report.card_usage is None
        assert "card 0" not in caption and "card 0" not in page
        return
    [card] = report.card_usage.cards
    assert card.busy_share is None and card.samples == 0  # unknown, not 0
    assert card.held_seconds == 0.0 and card.training_seconds == 0.0  # the linear member ran on the CPU
    assert report.card_usage.window[1] >= 8 * 0.85  # from the start to the cut at least
    assert saved["card_usage"]["cards"][0]["busy_share"] is None
    assert "card 0: busy unknown" in caption and "card 0: busy unknown" in page


def stopped(tmp_path, plan: dict | None, **fields) -> dict:
    """report.json as the watchdog leaves it, from a report written mid-training (the hand-made records above) and
    a monitor's samples beside it, 99.5 s into a 100 s budget."""
    from runner.watchdog import stopped_report

    tmp_path.mkdir(exist_ok=True)
    report = tmp_path / "report.json"
    fields = dict(units=UNITS, folds=FOLDS, epochs=EPOCHS, members=MEMBERS) | fields
    RunReport("dog-breed", "running", "log_loss", True, 100, 90, "s.csv", "blend: cnn 1.00", plan=plan,
              **fields).save(report)
    trained = samples(lambda t: 80 if 45 <= t < 75 else 0)
    (tmp_path / "monitor.jsonl").write_text("".join(json.dumps(s) + "\n" for s in trained))
    stopped_report(Budget(100, time.monotonic() - 99.5), report)
    return json.loads(report.read_text())


def test_a_run_its_watchdog_stops_still_says_how_it_used_its_card(tmp_path):
    """Stopped while a fold ran past the cut, the run never reached the supervisor's summary: the watchdog's report
    gives the card's figures from the units the report named, over the window up to the stop; the fold it last saw
    running (from 85 s, written at 90 s) held the card until the stop."""
    past_the_cut = unit("cnn", 2, 85.0, 90.0) | dict(status="running")
    saved = stopped(tmp_path, plan=dict(gpus=1), units=UNITS + (past_the_cut,))
    assert saved["status"] == "stopped" and "watchdog stopped it" in saved["stop_reason"]
    [card] = saved["card_usage"]["cards"]
    assert 99.5 <= card["window_seconds"] < 110  # to the stop, past the cut (85 s)
    stop = card["window_seconds"]
    assert card["held_seconds"] == pytest.approx(70.0 + stop - 85.0, abs=0.02)  # 10-80 s, and 85 s to the stop
    assert card["training_seconds"] == 30.0 and card["samples"] == 100  # no epoch line of the last fold yet
    assert card["busy_share"] == pytest.approx(30 * 0.8 / 100)  # the mean over the window's 100 samples
    assert [m["member"] for m in saved["card_usage"]["members"]] == ["cnn"]


def test_a_watchdog_stop_keeps_figures_already_given_and_gives_none_without_a_card(tmp_path):
    given = card_usage(1, WINDOW, UNITS[:1], (), (), MEMBERS, [])
    kept = stopped(tmp_path / "given", plan=dict(gpus=1), card_usage=given)
    assert RunReport.from_json(kept).card_usage == given  # the supervisor's own, written before the stop
    assert stopped(tmp_path / "cpu", plan=dict(gpus=0))["card_usage"] is None
    assert stopped(tmp_path / "unplanned", plan=None)["card_usage"] is None  # stopped before its plan


def test_a_monitor_file_the_figures_cannot_be_read_from_still_leaves_the_report_stopped(tmp_path):
    from runner.watchdog import stopped_report

    report = tmp_path / "report.json"
    RunReport("dog-breed", "running", "log_loss", True, 100, 90, "s.csv", "prior", plan=dict(gpus=1),
              units=UNITS).save(report)
    (tmp_path / "monitor.jsonl").write_text("not json\n")
    stopped_report(Budget(100, time.monotonic() - 99.5), report)
    saved = json.loads(report.read_text())
    assert saved["status"] == "stopped" and saved["card_usage"] is None
