#!/usr/bin/env python3
"""Checks train_gpt's TensorBoard event files in DIR against its metrics.jsonl.

    check_train_gpt_events.py DIR [--require-tensorboard]

Reads every events.out.tfevents.* file of DIR: each TFRecord's length and data must carry their
masked CRC32C, the first event must name the file version brain.Event:2, and the scalars of
every step (the last event of a step counting) must be those of the step's last JSON line in
DIR/metrics.jsonl, as float32. The standard library does that. With the tensorboard package
importable, its own event reader must read the same scalars; --require-tensorboard exits 77
(skipped) when it is not.
"""

import glob
import json
import os
import struct
import sys

TAGS = ("loss", "val_loss", "lr", "tokens_per_second", "bubble")


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        length_bytes = data[at:at + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert length_crc == masked(length_bytes), f"{path}: bad length CRC at byte {at}"
        record = data[at + 12:at + 12 + length]
        (record_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert record_crc == masked(record), f"{path}: bad data CRC at byte {at}"
        yield record
        at += 16 + length


def fields(message):
    """(field number, wire type, value) of a protocol-buffer message."""
    at = 0
    while at < len(message):
        key, at = varint(message, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(message, at)
        elif wire == 1:
            value, at = message[at:at + 8], at + 8
        elif wire == 5:
            value, at = message[at:at + 4], at + 4
        elif wire == 2:
            length, at = varint(message, at)
            value, at = message[at:at + length], at + length
        else:
            raise AssertionError(f"wire type {wire}")
        yield field, wire, value


def varint(data, at):
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def read_events(path):
    """The file version and {step: {tag: value}} of one events file, decoded here."""
    version, steps = None, {}
    for record in records(path):
        step, values = 0, {}
        for field, _, value in fields(record):
            if field == 2:
                step = value
            elif field == 3:
                version = value.decode()
            elif field == 5:
                for f, _, v in fields(value):
                    if f != 1:
                        continue
                    tag, number = None, None
                    for vf, _, vv in fields(v):
                        if vf == 1:
                            tag = vv.decode()
                        elif vf == 2:
                            (number,) = struct.unpack("<f", vv)
                    values[tag] = number
        if values:
            steps[step] = values
    return version, steps


def expected(directory):
    steps = {}
    with open(os.path.join(directory, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            tags = {t: j[t] for t in TAGS if t in j}
            for rank, b in j.get("peak_bytes", {}).items():
                tags[f"peak_bytes/rank_{rank}"] = b
            steps[j["step"]] = {t: struct.unpack("<f", struct.pack("<f", v))[0]
                                for t, v in tags.items()}
    return steps


def tensorboard_steps(paths):
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.util import tensor_util
    steps = {}
    for path in paths:
        for event in event_file_loader.EventFileLoader(path).Load():
            values = {}
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    values[v.tag] = v.simple_value
                else:
                    values[v.tag] = float(tensor_util.make_ndarray(v.tensor))
            if values:
                steps[event.step] = values
    return steps


def main():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    directory = sys.argv[1]
    require = "--require-tensorboard" in sys.argv[2:]
    # In the order they were written: a resumed run's file after the one before it.
    paths = sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")),
                   key=lambda p: (os.path.getmtime(p), p))
    if not paths:
        print(f"no events.out.tfevents.* file in {directory}")
        return 1
    want = expected(directory)
    got = {}
    for path in paths:
        version, steps = read_events(path)
        if version != "brain.Event:2":
            print(f"{path}: file version {version!r}, not brain.Event:2")
            return 1
        got.update(steps)
    if got != want:
        print(f"event files: {got}\nmetrics.jsonl: {want}")
        return 1
    try:
        read = tensorboard_steps(paths)
    except ImportError as e:
        if require:
            print(f"the tensorboard package cannot be imported ({e}): skipped")
            return 77
        print(f"{len(got)} steps read back from {len(paths)} event file(s), as metrics.jsonl")
        return 0
    if read != want:
        print(f"tensorboard read: {read}\nmetrics.jsonl: {want}")
        return 1
    print(f"{len(got)} steps read back by tensorboard's reader from {len(paths)} event file(s), "
          "as metrics.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
