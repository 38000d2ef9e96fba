"""A synthetic 3d-object-detection-for-autonomous-vehicles: Lyft Level 5 drives around Palo Alto, laid out as
MLE-bench splits the real train logs 80/20 (a log is a scene, its token the scene's): train_data/ and test_data/
with the nuScenes-style JSON tables of their logs (log, scene, sample, sample_data, ego_pose, calibrated_sensor;
attribute, category, sensor and visibility copied whole; map.json listing the TEST logs in both, as MLE-bench's
shared dict leaves it; sample_annotation and instance for train only), flat folders of camera JPEGs and lidar
.bin sweeps named as the sample_data records name them, the semantic map in train_maps/ and test_maps/;
train.csv `Id,PredictionString` (8 tokens an object: centre x, y, z, width, length, height, yaw, class), the
sample with an empty string for every test sample, and the answers in private/test.csv with a confidence of 1.0
before each object.

Each scene drives its car along a street past parked and moving objects of the nine classes in their real
imbalance (cars most); each sample is one moment, its boxes the objects within 50 m of the car. Nothing here says
where a test sample's objects are but its lidar sweep and photos, which no engine reads: the honest answer is an
empty string (no box), which scores 0.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import hex_ids

LOGS, SAMPLES = 10, 6  # the replica's own logs and samples a log
REAL_LOGS, REAL_SAMPLES = 180, 126  # 180 logs of about 25 s, 22,680 samples
CLASSES = {"car": (0.70, (1.9, 4.7, 1.7)), "pedestrian": (0.10, (0.7, 0.8, 1.75)),
           "other_vehicle": (0.08, (2.4, 6.5, 2.5)), "truck": (0.03, (2.8, 10.0, 3.4)),
           "bicycle": (0.03, (0.6, 1.8, 1.4)), "bus": (0.02, (2.9, 12.0, 3.4)),
           "motorcycle": (0.01, (0.9, 2.2, 1.5)), "animal": (0.015, (0.4, 0.8, 0.6)),
           "emergency_vehicle": (0.015, (2.4, 6.0, 2.4))}  # share of objects; width, length, height (m)
ATTRIBUTES = ("object_action_driving_straight_forward", "object_action_parked", "object_action_stopped",
              "object_action_walking", "object_action_standing", "object_action_running", "object_action_sitting",
              "object_action_lying_down", "object_action_reversing", "object_action_abnormal_or_traffic_violation",
              "object_action_left_turn", "object_action_right_turn", "object_action_loss_of_control",
              "object_action_u_turn", "object_action_lane_change_left", "object_action_lane_change_right",
              "object_action_other_motion", "object_action_gliding_on_wheels")
SENSORS = tuple([(f"CAM_{side}", "camera") for side in ("FRONT", "FRONT_RIGHT", "FRONT_LEFT", "BACK", "BACK_LEFT",
                                                       "BACK_RIGHT", "FRONT_ZOOMED")]
                + [("LIDAR_TOP", "lidar"), ("LIDAR_FRONT_RIGHT", "lidar"), ("LIDAR_FRONT_LEFT", "lidar")])
CAMERAS = 3  # photos a sample keeps here (real samples have 7)
RANGE = 50.0  # metres around the car within which objects are annotated
OBJECTS = 12  # objects along a scene's street
SAMPLE_SECONDS = 0.2  # between samples
ORIGIN = (2000.0, 1000.0, -18.0)  # world metres of the drives


def sizes(scale: float | str = 1.0) -> tuple[int, int]:
    """(logs, samples a log) at `scale` (a factor of the replica's own logs, or 'real', 'real/N')."""
    scale = parse_scale(scale)
    return scaled(LOGS, REAL_LOGS, scale, 5), REAL_SAMPLES if str(scale).startswith("real") else SAMPLES


def _quaternion(yaw: float) -> list[float]:
    return [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]


def _scene(log: str, host: str, samples: int, rng: np.random.Generator, tokens) -> dict:
    """A log's records: the scene, its samples, their sensor records and poses, and the annotated boxes."""
    heading = rng.uniform(0, 2 * np.pi)
    start = np.array(ORIGIN) + np.array([*rng.normal(0, 300, 2), 0.0])
    direction = np.array([np.cos(heading), np.sin(heading), 0.0])
    names = list(CLASSES)
    kinds = rng.choice(names, OBJECTS, p=[CLASSES[n][0] for n in names])
    along = rng.uniform(-20, samples * SAMPLE_SECONDS * 10 + 40, OBJECTS)
    side = rng.choice([-6.0, -3.0, 3.0, 6.0], OBJECTS)
    normal = np.array([-direction[1], direction[0], 0.0])
    places = start + along[:, None] * direction + side[:, None] * normal
    instances = [dict(token=t, category_token=str(k), nbr_annotations=0, first_annotation_token="",
                      last_annotation_token="") for t, k in zip(tokens(OBJECTS), kinds)]
    out = dict(samples=[], sample_data=[], ego_poses=[], annotations=[], rows=[], instances=instances)
    sample_tokens = tokens(samples)
    time = 1_557_858_000_000_000 + int(rng.integers(0, 10**12))
    for k, token in enumerate(sample_tokens):
        at = start + direction * 10 * SAMPLE_SECONDS * k
        stamp = time + int(k * SAMPLE_SECONDS * 1e6)
        out["samples"].append(dict(token=token, timestamp=stamp, scene_token=log,
                                   prev=sample_tokens[k - 1] if k else "",
                                   next=sample_tokens[k + 1] if k + 1 < samples else ""))
        pose = dict(token=tokens(1)[0], timestamp=stamp, rotation=_quaternion(heading), translation=at.tolist())
        out["ego_poses"].append(pose)
        for sensor, (channel, modality) in enumerate(SENSORS[:CAMERAS] + (SENSORS[7],)):
            lidar = modality == "lidar"
            device, suffix = ("lidar1", "bin") if lidar else (f"cam{sensor}", "jpeg")
            name = f"{host}_{device}_{stamp * 1000 + sensor}.{suffix}"
            out["sample_data"].append(dict(
                token=tokens(1)[0], sample_token=token, ego_pose_token=pose["token"],
                calibrated_sensor_token=f"{log[:8]}-{channel}", timestamp=stamp, fileformat=suffix,
                is_key_frame=True, height=0 if lidar else 12, width=0 if lidar else 16,
                filename=f"{'lidar' if lidar else 'images'}/{name}", prev="", next=""))
        boxes = []
        for j in np.flatnonzero(np.linalg.norm(places[:, :2] - at[:2], axis=1) < RANGE):
            width, length, height = np.array(CLASSES[kinds[j]][1]) * rng.uniform(0.9, 1.1, 3)
            yaw = float((heading + (np.pi if side[j] < 0 and rng.random() < 0.5 else 0.0)) % (2 * np.pi) - np.pi)
            centre = places[j] + np.array([0.0, 0.0, height / 2])
            out["annotations"].append(dict(
                token=tokens(1)[0], sample_token=token, instance_token=instances[j]["token"], visibility_token="4",
                attribute_tokens=[], translation=centre.tolist(), size=[width, length, height],
                rotation=_quaternion(yaw), prev="", next="", num_lidar_pts=int(rng.integers(5, 400)),
                num_radar_pts=0, category_name=str(kinds[j])))
            x, y, z = (float(v) for v in centre)
            boxes.append(f"{x!r} {y!r} {z!r} {width:.3f} {length:.3f} {height:.3f} {yaw!r} {kinds[j]}")
        if not boxes:  # every real sample has at least one object
            x, y, z = (float(v) for v in at + np.array([8.0, 0.0, 0.85]))
            boxes.append(f"{x!r} {y!r} {z!r} 1.900 4.700 1.700 {float(heading - np.pi)!r} car")
        out["rows"].append((token, " ".join(boxes)))
    scene = dict(token=log, log_token=log, nbr_samples=samples, first_sample_token=sample_tokens[0],
                 last_sample_token=sample_tokens[-1], name=f"{host}-{log[:6]}", description="")
    return {**out, "scene": scene}


def _files(folder_images: Path, folder_lidar: Path, records: list[dict], rng: np.random.Generator) -> None:
    picture = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8)).save(picture, "JPEG", quality=70)
    for record in records:
        name = Path(record["filename"]).name
        if record["fileformat"] == "jpeg":
            (folder_images / name).write_bytes(picture.getvalue())
        else:  # x, y, z, intensity, ring: float32 records
            (folder_lidar / name).write_bytes(rng.normal(0, 20, (24, 5)).astype(np.float32).tobytes())


def _dump(folder: Path, name: str, records) -> None:
    (folder / name).write_text(json.dumps(records))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, sample_submission.csv, train_data/, test_data/, the image, lidar and map
    folders, description.md) and prepared/private/test.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    for folder in ("train_data", "test_data", "train_images", "test_images", "train_lidar", "test_lidar",
                   "train_maps", "test_maps"):
        (public / folder).mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    logs, samples = sizes(scale)

    def tokens(count: int) -> list[str]:
        return hex_ids(rng, count, 64)

    log_tokens = tokens(logs)
    test_logs = set(rng.choice(log_tokens, max(1, int(np.ceil(0.2 * logs))), replace=False))
    scenes = {log: _scene(log, f"host-a{int(rng.integers(1, 120)):03d}", samples, rng, tokens) for log in log_tokens}
    categories = [dict(token=name, name=name, description="") for name in CLASSES]
    shared = {"attribute.json": [dict(token=str(k), name=n, description="") for k, n in enumerate(ATTRIBUTES)],
              "category.json": categories,
              "sensor.json": [dict(token=c, channel=c, modality=m) for c, m in SENSORS],
              "visibility.json": [dict(token=str(k), level=f"v{20 * (k - 1)}-{20 * k}" if k < 4 else "v80-100",
                                       description="") for k in range(1, 5)]}
    the_map = dict(log_tokens=[t for t in log_tokens if t in test_logs], category="semantic_prior",
                   filename="maps/map_raster_palo_alto.png", token=tokens(1)[0])
    rows = {}
    for split, chosen in (("train", [t for t in log_tokens if t not in test_logs]),
                          ("test", [t for t in log_tokens if t in test_logs])):
        data = public / f"{split}_data"
        parts = [scenes[t] for t in chosen]
        _dump(data, "log.json", [dict(token=t, logfile=f"{scenes[t]['scene']['name']}.log", vehicle="a101",
                                      date_captured="2019-05-14", location="Palo Alto") for t in chosen])
        _dump(data, "scene.json", [p["scene"] for p in parts])
        _dump(data, "sample.json", [s for p in parts for s in p["samples"]])
        sample_data = [d for p in parts for d in p["sample_data"]]
        _dump(data, "sample_data.json", sample_data)
        _dump(data, "ego_pose.json", [e for p in parts for e in p["ego_poses"]])
        calibrations = {d["calibrated_sensor_token"]: dict(token=d["calibrated_sensor_token"],
                                                           sensor_token=d["calibrated_sensor_token"].split("-")[1],
                                                           translation=[1.0, 0.0, 1.6], rotation=[1.0, 0.0, 0.0, 0.0],
                                                           camera_intrinsic=[]) for d in sample_data}
        _dump(data, "calibrated_sensor.json", list(calibrations.values()))
        _dump(data, "map.json", [the_map])
        for name, records in shared.items():
            _dump(data, name, records)
        if split == "train":
            _dump(data, "sample_annotation.json", [a for p in parts for a in p["annotations"]])
            _dump(data, "instance.json", [i for p in parts for i in p["instances"]])
        _files(public / f"{split}_images", public / f"{split}_lidar", sample_data, rng)
        map_picture = public / f"{split}_maps" / "map_raster_palo_alto.png"
        Image.new("RGB", (64, 64), (40, 40, 40)).save(map_picture)
        rows[split] = [r for p in parts for r in p["rows"]]
    train = pd.DataFrame(rows["train"], columns=["Id", "PredictionString"])
    test = pd.DataFrame(rows["test"], columns=["Id", "PredictionString"])
    train.to_csv(public / "train.csv", index=False)
    confident = test["PredictionString"].map(
        lambda s: " ".join(" ".join(["1.0", *t]) for t in np.array(s.split(" ")).reshape(-1, 8).tolist()))
    test.assign(PredictionString=confident).to_csv(private / "test.csv", index=False)
    test[["Id"]].assign(PredictionString="").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Lyft 3D Object Detection for Autonomous Vehicles",
             "Predict the 3-D boxes of the objects around the car in each test sample (test_data/sample.json, "
             "test_images/, test_lidar/): `confidence center_x center_y center_z width length height yaw "
             "class_name` for each, space-separated.",
             "Submissions are scored on the mean average precision over 3-D IoU thresholds 0.5 to 0.95, per sample.",
             "Submit `Id,PredictionString` for every test sample.")
