"""The audio engines: clips of any format decoded once into log-mel spectrograms, the band-statistics members that
learn from them on CPU slots, and the spectrogram CNN planned and augmented as sound."""
import time

import numpy as np
import pandas as pd
import pytest
import soundfile
import torch

from conftest import CORES
from runner.common import metrics
from runner.data.loading import load_dataset
from runner.demo import write_demo
from runner.demo._sounds import chirp, write_aiff, write_wav
from runner.planning.registry import get_engine
from runner.engines.sound import CLIPS_PER_CORE_SECOND, SoundSettings, band_table
from runner.units.worker import as_predictions, fold_data
from runner.units.tasks import assign_folds
from runner.machine.hardware import GiB, Hardware
from runner.planning.planner import data_shape, make_plan
from runner.planning.portfolio import DataShape
from runner.machine.profiles import profile
from runner.data.sounds import Framing, clip_seconds, decode, framing, log_mel, mel_filters, spectrograms
from runner.competition.inference import infer_spec
from runner.competition.catalog import load_spec

WHALE = "the-icml-2013-whale-challenge-right-whale-redux"


def test_clips_of_any_format_and_rate_decode_to_the_competitions_one_rate_and_length(tmp_path):
    """WAV at 16 kHz, AIFF at 8 kHz and FLAC at 16 kHz (stereo): the median rate and length, read from the headers;
    each clip resampled, cut or padded to it; a file that is no sound at all is None, not a crash."""
    tone = np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)
    write_wav(tmp_path / "a.wav", tone, 16000)
    write_aiff(tmp_path / "b.aif", tone[::2], 8000)  # the same second at half the rate
    soundfile.write(tmp_path / "c.flac", np.stack([tone[:8000], tone[:8000]], axis=1), 16000)  # half a second
    (tmp_path / "d.wav").write_bytes(b"RIFF not really")
    paths = [tmp_path / n for n in ("a.wav", "b.aif", "c.flac", "d.wav")]
    shape = framing(paths)
    assert (shape.rate, shape.samples, shape.n_fft) == (16000, 16000, 1024)
    clips = [decode(p, shape.rate, shape.samples) for p in paths]
    assert clips[3] is None
    assert all(c.shape == (16000,) and c.dtype == np.float32 for c in clips[:3])
    assert np.abs(clips[2][8000:]).max() == 0  # padded with silence
    for clip in clips[:3]:  # every one still a 440 Hz tone after resampling
        spectrum = np.abs(np.fft.rfft(clip[:8000]))
        assert abs(np.argmax(spectrum) * 16000 / 8000 - 440) <= 2


def test_a_tone_lights_the_mel_band_of_its_pitch():
    shape = Framing(rate=16000, samples=16000, n_fft=1024, hop=256, mels=64)
    filters = mel_filters(shape.rate, shape.n_fft, shape.mels)
    bins = np.linspace(0, 8000, 513)
    for hz in (300.0, 1000.0, 5000.0):
        tone = np.sin(2 * np.pi * hz * np.arange(16000) / 16000).astype(np.float32)
        spectrum = log_mel(tone, shape, filters)
        assert spectrum.shape == (64, shape.frames)
        band = int(np.argmax(spectrum.mean(axis=1)))
        assert filters[band, np.argmin(np.abs(bins - hz))] > 0.3  # the loudest band's filter covers the tone


def test_the_band_table_tells_an_up_sweep_from_a_down_sweep():
    """Pooled over time, an up-sweep and a down-sweep through the same band are the same sound; the loudest band's
    track over time is what tells them apart (the whale's up-call from a down-swept distractor)."""
    rng = np.random.default_rng(0)
    shape = Framing(rate=2000, samples=2000, n_fft=256, hop=64, mels=64)
    filters = mel_filters(shape.rate, shape.n_fft, shape.mels)

    def clip(start, end):
        noise = rng.normal(0, 0.05, 2000)
        return log_mel((noise + chirp(2000, 2000, start, end, 200, 1600)).astype(np.float32), shape, filters)

    table = band_table(np.stack([clip(100, 300), clip(300, 100), clip(200, 200)]))
    slope = table[:, -6]  # the track's slope, first of the six track columns
    assert slope[0] > 0.1 and slope[1] < -0.1 and abs(slope[2]) < 0.05
    assert table.shape[1] == 64 * 7 + 16 * 8 + 6


def test_the_spectrograms_are_decoded_once_for_every_audio_member(tmp_path):
    tone = np.sin(2 * np.pi * 440 * np.arange(4000) / 8000)
    paths = []
    for i in range(4):
        write_wav(tmp_path / f"{i}.wav", tone * (i + 1), 8000)
        paths.append(tmp_path / f"{i}.wav")
    first, ok = spectrograms(paths + [None], tmp_path / "work", workers=2)
    assert first.shape[0] == 5 and ok.tolist() == [True] * 4 + [False]
    written = (tmp_path / "work" / "spectrograms.npy").stat().st_mtime_ns
    again, ok_again = spectrograms(paths + [None], tmp_path / "work", workers=2)  # another member's prepare step
    assert (tmp_path / "work" / "spectrograms.npy").stat().st_mtime_ns == written
    assert np.array_equal(first, again) and np.array_equal(ok, ok_again)


@pytest.fixture(scope="module")
def whale(tmp_path_factory):
    root = write_demo(WHALE, tmp_path_factory.mktemp("whale"), seed=3)
    return root / "prepared" / "public"


def test_the_sound_members_learn_whale_up_calls_far_beyond_the_prior(whale, tmp_path):
    """The whale replica (faint up-sweeps in noise, distractor tones and sweeps) through the real loader: its
    clips are an audio view, and both heads on one band table beat chance by a wide margin on a held-out fold."""
    spec = load_spec(WHALE)
    dataset = load_dataset(spec, whale, tmp_path)
    train, test = dataset.views["audio"]
    assert (len(train), len(test), dataset.image_side) == (300, 120, 64)
    assert all(str(p).endswith(".aif") for p in train + test)
    engine = get_engine("sound")
    prepared = engine.prepare(SoundSettings(), dataset, tmp_path, threads=CORES)
    data = fold_data(prepared, "audio", assign_folds(prepared.y, True, 5, 0), 0)
    for head in ("linear", "boosted"):
        result = engine.train_fold(SoundSettings(head=head), data, tmp_path, deadline=time.monotonic() + 60)
        auc = metrics.score(spec.metric, data.y_val, as_predictions(result.val_pred, data.classes))
        assert auc > 0.7, (head, auc)  # the sample's constant scores 0.5
        assert result.test_pred.shape == (120, 2)


def test_a_clips_decode_is_measured_and_the_sound_members_prepare_is_planned_from_it(whale, tmp_path):
    """Ten seconds at 44.1 kHz (resampled) cost many times a second at 2 kHz: the measure tells them apart, and
    the band members' prepare step is planned from it. The whale replica's short clips make its band members cheap
    enough to go before the spectrogram CNN that would otherwise fill a one-core window (on a busy core it did, and
    learned noise)."""
    rng = np.random.default_rng(0)
    for name, rate, seconds in (("short", 2000, 1), ("long", 44100, 10)):
        (tmp_path / name).mkdir()
        for i in range(6):
            write_wav(tmp_path / name / f"{i}.wav", rng.normal(0, 0.1, rate * seconds), rate)
    short, long = (clip_seconds(sorted((tmp_path / n).iterdir())) for n in ("short", "long"))
    assert 0 < short * 5 < long, (short, long)
    assert clip_seconds([None]) == 0.0
    spec = load_spec(WHALE)
    prepares = [make_plan(spec, profile("cpu"), 600, DataShape(3000, 1000, classes=2, inputs=frozenset({"audio"}),
                                                                 image_side=64, decode_seconds=each)
                          ).member("sound").prepare_seconds for each in (short, long)]
    assert prepares[0] < prepares[1], prepares
    dataset = load_dataset(spec, whale, tmp_path / "work", budget_seconds=20)
    assert 0 < dataset.decode_seconds < 1 / CLIPS_PER_CORE_SECOND  # the replica's 1 s clips at 2 kHz
    one_core = Hardware(gpus=(), cpus=1, ram_bytes=8 * GiB, shm_bytes=GiB, disk_free_bytes=50 * GiB)
    plan = make_plan(spec, one_core, 20, data_shape(dataset))
    assert [m.engine for m in plan.members][-1] == "spectrogram", [m.name for m in plan.members]


@pytest.mark.parametrize("machine", ["cpu", "h100-80gb"])
def test_an_audio_competition_plans_a_spectrogram_cnn_beside_the_band_members(machine):
    spec = load_spec(WHALE)
    data = DataShape(3000, 1000, classes=2, inputs=frozenset({"audio"}), image_side=64)
    plan = make_plan(spec, profile(machine), 600, data)
    cnn = plan.member("spectrogram")
    assert cnn.engine == "spectrogram" and cnn.settings.augment == "spectrogram"
    assert cnn.slot == ("gpu" if machine != "cpu" else "cpu")
    assert cnn.reasons[0].startswith("spectrogram: every clip's 64-band log-mel spectrogram")
    assert {"sound", "sound-gbm"} <= {m.name for m in plan.members}
    assert all(m.slot == "cpu" for m in plan.members if m.engine == "sound")
    engine = get_engine("spectrogram")
    assert engine.prepare_key(cnn.settings) != get_engine("timm").prepare_key(cnn.settings)
    assert not get_engine("timm").applies(spec, data.inputs)  # photos' engine takes no clips


def test_a_spectrogram_picture_keeps_high_pitch_at_the_top():
    from runner.engines.timm.spectrogram import picture

    spectrum = np.full((64, 31), -100.0, dtype=np.float32)  # more than RANGE_DB under the peak: black
    spectrum[60:] = -10.0  # energy in the highest bands only
    image = picture(spectrum, 64)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    assert image[:4, :, 0].mean() > 200 and image[-8:, :, 0].mean() < 10


def test_sound_augmentation_crops_in_time_never_flips_and_masks_a_few_frames_and_bands():
    from runner.engines.timm.augment import DeviceAugment

    augment = DeviceAugment(32, (0, 0, 0), (1 / 255, 1 / 255, 1 / 255), "bilinear", torch.device("cpu"),
                            torch.contiguous_format, sound=True)
    boxes = augment.crop_boxes(200)
    assert torch.all(boxes[:, 1] == 1) and torch.all(boxes[:, 3] == 0.5)  # every band, whole
    assert torch.all((boxes[:, 0] >= 0.7) & (boxes[:, 0] <= 1))
    ramp = torch.arange(1, 33, dtype=torch.uint8).repeat(16, 3, 32, 1) * 7  # brighter to the right: time order
    out = augment.train(ramp)
    masked = 0
    for picture in out[:, 0]:
        bands, frames = ~picture.eq(0).all(dim=1), ~picture.eq(0).all(dim=0)  # what the masks left
        columns = picture[bands][:, frames].mean(dim=0)
        assert torch.all(columns[1:] >= columns[:-1] - 1e-3)  # still in time order: no flip
        masked += int(picture.eq(0).any())
    assert masked > 0


def test_an_unknown_competition_with_a_folder_of_id_named_clips_is_inferred_as_audio(tmp_path):
    for folder, ids in (("train_audio", range(6)), ("test_audio", range(6, 8))):
        (tmp_path / folder).mkdir()
        for i in ids:
            write_wav(tmp_path / folder / f"rec{i}.wav", np.zeros(800), 8000)
    pd.DataFrame({"id": [f"rec{i}" for i in range(6)], "label": list("abcabc")}).to_csv(tmp_path / "train.csv",
                                                                                       index=False)
    pd.DataFrame({"id": ["rec6", "rec7"], "a": 1 / 3, "b": 1 / 3, "c": 1 / 3}).to_csv(
        tmp_path / "sample_submission.csv", index=False)
    spec = infer_spec("new-sounds", tmp_path)
    assert (spec.task, spec.image_dir, spec.test_image_dir, spec.image_suffix) == (
        "audio", "train_audio", "test_audio", ".wav")
    assert any(line.startswith("sound clips: train_audio/ holds a file named id + .wav") for line in spec.evidence)


BIRDS = "mlsp-2013-birds"


@pytest.fixture(scope="module")
def birds(tmp_path_factory):
    return write_demo(BIRDS, tmp_path_factory.mktemp("birds"), seed=3) / "prepared" / "public"


def test_birds_recordings_are_items_with_a_label_column_per_species_and_the_segment_histograms_a_table(birds,
                                                                                                    tmp_path):
    """The layout lists recordings, labels and file names in essential_data/; the sample has a row per (recording,
    species). The dataset has a row per recording: 19 0/1 columns, its clip, and its ready histogram features;
    the test recordings in the sample's order."""
    spec = load_spec(BIRDS)
    dataset = load_dataset(spec, birds, tmp_path)
    sample = pd.read_csv(birds / "sample_submission.csv")
    test_recordings = pd.unique(sample["Id"] // 100)
    assert dataset.y.shape == (160 - len(test_recordings), 19) and set(np.unique(dataset.y)) == {0.0, 1.0}
    assert dataset.classes is None and dataset.n_test == len(test_recordings)
    train, test = dataset.views["audio"]
    names = pd.read_csv(birds / "essential_data" / "rec_id2filename.txt").set_index("rec_id")["filename"]
    assert [p.name for p in test] == [f"{names[r]}.wav" for r in test_recordings]
    table, test_table = dataset.views["table"]
    assert table.shape == (len(train), 100) and test_table.shape == (len(test), 100)
    histogram = pd.read_csv(birds.parent.parent / "prepared" / "public" / "supplemental_data" /
                            "histogram_of_segments.txt", header=None, skiprows=1).set_index(0)
    assert np.allclose(test_table.to_numpy(), histogram.loc[test_recordings].to_numpy())


def test_predictions_per_recording_fill_the_samples_row_per_recording_and_species(birds):
    from runner.common.errors import InvalidSubmissionError
    from runner.results.submission import Predictions, build_submission

    spec = load_spec(BIRDS)
    sample = pd.read_csv(birds / "sample_submission.csv")
    recordings = pd.unique(sample["Id"] // 100)
    values = np.random.default_rng(0).random((len(recordings), 19))
    frame = build_submission(sample, spec, ["Probability"], Predictions(values, None, "test"))
    row = {r: i for i, r in enumerate(recordings)}
    expected = [values[row[i // 100], i % 100] for i in sample["Id"]]
    assert np.allclose(frame["Probability"], expected) and frame["Id"].equals(sample["Id"])
    with pytest.raises(InvalidSubmissionError, match="items x 19 labels"):
        build_submission(sample, spec, ["Probability"], Predictions(values[:-1], None, "test"))


def test_auc_over_several_labels_is_pooled_over_every_row_and_label_in_both_forms():
    rng = np.random.default_rng(0)
    y, pred = (rng.random((60, 19)) < 0.2).astype(float), rng.random((60, 19))
    pred[y == 1] += 0.3
    pooled = metrics.score("roc_auc", y, pred)
    from sklearn.metrics import roc_auc_score

    assert pooled == pytest.approx(roc_auc_score(y.ravel(), pred.ravel()))
    assert metrics.fast_score("roc_auc", y, pred) == pytest.approx(pooled)
    assert pooled != pytest.approx(metrics.score("mean_column_roc_auc", y, pred))


def test_a_labels_file_line_that_is_no_list_of_numbers_is_named(birds, tmp_path):
    import shutil

    from runner.common.errors import InputError

    copy = tmp_path / "public"
    shutil.copytree(birds, copy)
    path = copy / "essential_data" / "rec_labels_test_hidden.txt"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].split(",")[0] + ",seven"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"rec_labels_test_hidden.txt: line 4"):
        load_dataset(load_spec(BIRDS), copy, tmp_path / "work")


def test_the_sound_members_hear_which_species_sing_beyond_their_frequencies(birds, tmp_path):
    """Ridge on the band table, one output per species, against each species' training frequency (the rule
    baseline this competition had): pooled AUC on a held-out fold."""
    spec = load_spec(BIRDS)
    dataset = load_dataset(spec, birds, tmp_path)
    engine = get_engine("sound")
    prepared = engine.prepare(SoundSettings(), dataset, tmp_path, threads=CORES)
    data = fold_data(prepared, "audio", assign_folds(prepared.y, False, 5, 0), 0)
    result = engine.train_fold(SoundSettings(), data, tmp_path, deadline=time.monotonic() + 60)
    auc = metrics.score(spec.metric, data.y_val, result.val_pred)
    prior = metrics.score(spec.metric, data.y_val, np.tile(data.y_train.mean(axis=0), (len(data.y_val), 1)))
    assert auc > prior + 0.1, (auc, prior)
    assert result.test_pred.shape == (prepared.n_test, 19)
