"""`broker dump-log`: librdkafka produces keyed records with headers, and the admin command
prints every one of them from the partition's segment file (text and --json), and reports a
torn tail instead of crashing."""

import json
import shutil
import subprocess

from conftest import BROKER_BIN
from e2e_helpers import ck_produce, ck_producer, create_topic, unique

N = 40


def dump_log(path, *flags):
    return subprocess.run(
        [BROKER_BIN, "dump-log", str(path), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


def produce_records(broker, topic, compression="none"):
    producer = ck_producer(broker.bootstrap, **{"compression.type": compression})
    messages = [
        {
            "partition": 0,
            "key": f"key-{i}".encode(),
            "value": f"value-{i}-é".encode(),
            "headers": [("h", f"hv-{i}".encode()), ("n", None)],
        }
        for i in range(N)
    ]
    log = ck_produce(producer, topic, messages)
    assert not log.errors
    return {r.offset: r for r in log.ok}


def segments(broker, topic):
    files = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert files, f"no segment files for {topic}"
    return files


def json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_dump_log_prints_every_record(broker):
    for compression in ("none", "zstd"):
        topic = create_topic(broker.bootstrap, unique(f"dump-{compression}"), 1)
        produced = produce_records(broker, topic, compression)
        assert sorted(produced) == list(range(N))

        lines = []
        for seg in segments(broker, topic):
            res = dump_log(seg, "--print-data", "--json")
            assert res.returncode == 0, res.stderr
            lines += json_lines(res.stdout)
        batches = [x for x in lines if x["type"] == "batch"]
        records = [x for x in lines if x["type"] == "record"]
        assert not [x for x in lines if x["type"] == "corrupt"]
        assert batches and all(b["crc_valid"] and b["magic"] == 2 for b in batches)
        assert {b["compression"] for b in batches} == {compression}
        assert sum(b["count"] for b in batches) == N
        assert [r["offset"] for r in records] == list(range(N))
        for r in records:
            p = produced[r["offset"]]
            assert r["key"].encode() == p.key
            assert r["value"].encode() == p.value
            assert r["headers"] == [
                {"key": "h", "value": f"hv-{r['offset']}"},
                {"key": "n", "value": None},
            ]

        # Kafka's text format, one "| offset:" line per record.
        res = dump_log(segments(broker, topic)[0], "--print-data")
        assert res.returncode == 0, res.stderr
        text_records = [ln for ln in res.stdout.splitlines() if ln.startswith("| offset: ")]
        assert len(text_records) == N
        assert "key: key-7 payload: value-7-é" in res.stdout
        assert f"compresscodec: {compression}" in res.stdout
        assert "isvalid: true" in res.stdout
        # Without --print-data only batches are printed.
        res = dump_log(segments(broker, topic)[0])
        assert res.returncode == 0
        assert "| offset:" not in res.stdout and "baseOffset: 0 " in res.stdout


def test_dump_log_reports_torn_tail(broker, tmp_path):
    topic = create_topic(broker.bootstrap, unique("dump-torn"), 1)
    produce_records(broker, topic)
    seg = segments(broker, topic)[0]
    copy = tmp_path / seg.name
    shutil.copyfile(seg, copy)
    size = copy.stat().st_size
    with open(copy, "r+b") as f:
        f.truncate(size - 5)
    res = dump_log(copy, "--print-data", "--json")
    assert res.returncode == 0, res.stderr
    assert "panicked" not in res.stderr
    lines = json_lines(res.stdout)
    corrupt = [x for x in lines if x["type"] == "corrupt"]
    assert len(corrupt) == 1 and "truncated" in corrupt[0]["error"]
    assert corrupt[0]["position"] + corrupt[0]["bytes"] == size - 5
    res = dump_log(tmp_path / "missing.log")
    assert res.returncode != 0 and "missing.log" in res.stderr
