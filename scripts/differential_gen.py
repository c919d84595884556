"""The generated differential corpus (issue 24 item 5), run by
`scripts/differential.py --generated N [--seed S]` (which starts both brokers and calls run()).

tests/differential/generator.py makes case i of seed S from (S, i) alone. The set-up creates
the same topics on both brokers, fills them, commits offsets for one group and waits until
Kafka's metadata and group coordinator are ready; then every case is sent on a fresh
connection to our broker and then to Kafka, in order, and both answers are normalised and
compared with differential.py's code (normalise, diff). The differences that are neither
explained nor a known bug are grouped by (API, field path with the indices dropped, kind of
difference), each group printed once with its count, the versions it was seen at and the
first case showing it, and a replay command:

  scripts/differential.py --seed S --case I [--with-prefix]

(--with-prefix first runs cases 0..I-1 quietly, for a difference that depends on their state.)
Exit 1 when a group is a closed connection / timeout / undecodable answer on one side only.
"""
import re
import sys
import time
import uuid
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "differential"))
sys.path.insert(0, str(ROOT / "scripts"))
import corpus  # noqa: E402
import differential as D  # noqa: E402
import generator  # noqa: E402

CASE_TIMEOUT = 5  # seconds per answer: a Fetch or JoinGroup left waiting is a "timeout"

# Masked in the generated answers only (ids each broker makes up).
GEN_MASK = {"member_id", "leader", "session_id", "group_instance_id_echo"}

# Differences of the generated corpus explained without a row in differential.EXPLAINED:
# (api regex, version predicate, path regex, reason). Filled from what the runs found; the
# README's "Generated corpus" section lists the same.
GEN_EXPLAINED = [
]


def explained_rows():
    """differential.EXPLAINED's rows as (api, version predicate, path regex, reason): a row
    applies to the API of the corpus cases it names; at the versions below kafka-python's
    schema minimum only when its corpus case is one (produce_v2_unsupported_format)."""
    rows = []
    for case_re, path_re, reason in D.EXPLAINED:
        for c in corpus.CASES:
            if re.search(case_re, c["name"]):
                cls = D.CLASSES[c["api"] + "Request"]
                lo = cls.valid_versions[0]
                if c["version"] < lo:
                    pred = (lambda lo: lambda v: v < lo)(lo)
                else:
                    pred = (lambda lo: lambda v: v >= lo)(lo)
                rows.append((f"^{c['api']}$", pred, path_re, reason))
                break
    return rows


def topic(name, epoch):
    """A set-up topic's name in state epoch `epoch` (fresh topics after a divergence)."""
    return name if epoch == 0 else f"{name}-e{epoch}"


def resolve(v, ids, epoch=0):
    """"@id:TOPIC" -> that broker's topic id (the other brokers' ids cannot be sent); a set-up
    topic's name -> its name in the current epoch."""
    if isinstance(v, dict):
        return {k: resolve(x, ids, epoch) for k, x in v.items()}
    if isinstance(v, list):
        return [resolve(x, ids, epoch) for x in v]
    if isinstance(v, str) and v.startswith("@id:"):
        return ids.get(topic(v[4:], epoch), uuid.UUID(int=0))
    if isinstance(v, str) and v in generator.SETUP_TOPICS:
        return topic(v, epoch)
    return v


ID_KEYS = ("name", "topic", "partition_index", "partition", "index", "resource_name",
           "group_id", "topic_name", "transactional_id", "key", "api_key")


def mask(v, key=None):
    """GEN_MASK's ids masked; a list of structs sorted by its identity field (Kafka answers
    partitions and topics in its maps' order, which carries no meaning)."""
    if isinstance(v, dict):
        return {k: mask(x, k) for k, x in v.items()}
    if isinstance(v, list):
        out = [mask(x, key) for x in v]
        if out and all(isinstance(x, dict) for x in out):
            k = next((k for k in ID_KEYS if k in out[0]), None)
            if k is not None:
                out.sort(key=lambda x: repr(x.get(k)))
        return out
    if key in GEN_MASK and v not in (None, "", -1, 0):
        return "<id>"
    return v


def has_duplicate(v):
    """A list of structs in which two entries have the same first field (name / index)."""
    if isinstance(v, dict):
        return any(has_duplicate(x) for x in v.values())
    if isinstance(v, list):
        if v and all(isinstance(x, dict) and x for x in v):
            keys = [repr(next(iter(x.values()))) for x in v]
            if len(set(keys)) < len(keys):
                return True
        return any(has_duplicate(x) for x in v)
    return False


def roots(diffs):
    """Differences caused by another dropped: where an error_code differs, the other fields
    of its struct (offsets, messages, ...) follow from it."""
    errs = [p[:-len("error_code")] for p, _, _ in diffs if p.endswith("error_code")]
    out = []
    for d in diffs:
        p = d[0]
        if (not p.endswith("error_code") and p not in ("outcome", "_detail")
                and any(p.startswith(e) for e in errs)):
            continue
        out.append(d)
    return out


CONFIG_FIELDS = {"value", "read_only", "config_source", "config_type", "documentation",
                 "is_sensitive", "synonyms", "is_default"}


def general_path(p):
    """The path a difference is grouped by: indices dropped, a config's name too (the
    configs are compared per name, and a broker's hundreds of configs would each be a group;
    the example printed names one)."""
    p = re.sub(r"\[\d+\]", "[]", p)
    if ".configs." in p:
        head, tail = p.split(".configs.", 1)
        last = tail.rsplit(".", 1)
        p = head + ".configs.*" + (f".{last[-1]}" if len(last) == 2 and last[-1] in CONFIG_FIELDS else "")
    return p


def kind(path, a, b, dup=False):
    k = _kind(path, a, b)
    if dup and isinstance(a, list) and isinstance(b, list) and len(a) != len(b):
        k += " (the request names an entry twice)"
    return k


def _kind(path, a, b):
    if path.endswith("error_code") or path == "outcome":
        return f"{a} vs {b}"
    if a == "<absent>" or b == "<absent>":
        return "ours absent" if a == "<absent>" else "kafka absent"
    if isinstance(a, list) and isinstance(b, list):
        return f"list of {len(a)} vs {len(b)}" if max(len(a), len(b)) <= 3 else "list lengths"
    if a is None or b is None:
        return "ours null" if a is None else "kafka null"
    if isinstance(a, bool):
        return f"{a} vs {b}"
    return "value"


def ask(addr, case, ids, epoch=0):
    """One case on one broker: the normalised answer, or an outcome."""
    c = dict(case, request=resolve(case["request"], ids, epoch))
    try:
        D.encode(c, c["version"], 1)
    except Exception as e:  # noqa: BLE001
        return {"outcome": "not encodable", "_detail": f"{type(e).__name__}: {e}"}
    try:
        out = D.run_case(addr, c, timeout=CASE_TIMEOUT)
    except socket_errors() as e:
        return {"outcome": "no answer (timeout)" if "timed out" in str(e) else "connection error",
                "_detail": type(e).__name__}
    except Exception as e:  # noqa: BLE001
        return {"outcome": "answer not decodable", "_detail": f"{type(e).__name__}: {e}"}
    if out.get("_detail") in ("timeout", "TimeoutError"):
        out = {"outcome": "no answer (timeout)"}
    return mask(D.normalise(out))


def socket_errors():
    import socket
    return (socket.timeout, ConnectionError, OSError)


# -- set-up ---------------------------------------------------------------------------------

def rpc(addr, api, version, request, timeout=15):
    return D.run_case(addr, {"api": api, "version": version, "request": request}, timeout=timeout)


def setup(addr, epoch=0):
    """The same state on a broker: the topics, records, a group's offsets. Returns the ids of
    the topics (name -> uuid)."""
    out = rpc(addr, "CreateTopics", 5, corpus.create(
        *[(topic(n, epoch), p, 1, cfg) for n, (p, cfg) in generator.SETUP_TOPICS.items()]))
    bad = [t for t in out["topics"] if t["error_code"] not in (0, 36)]
    if bad:
        raise SystemExit(f"set-up CreateTopics on {addr}: {bad}")
    deadline = time.monotonic() + 30
    while True:  # Kafka's metadata cache learns of the topics a moment later
        md = rpc(addr, "Metadata", 12, corpus.metadata(*[topic(n, epoch) for n in generator.SETUP_TOPICS]))
        if all(t["error_code"] == 0 and t["partitions"] and
               all(p["leader_id"] >= 0 for p in t["partitions"]) for t in md["topics"]):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"set-up topics not ready on {addr}: {md['topics']}")
        time.sleep(0.2)
    ids = {t["name"]: t["topic_id"] for t in md["topics"]}
    for name, (parts, _) in generator.SETUP_TOPICS.items():
        if name in ("gen-grow", "gen-cfg"):
            continue
        for p in range(parts):
            for b in range(generator.SETUP_RECORDS):
                deadline = time.monotonic() + 30
                while True:  # Kafka: NOT_LEADER_OR_FOLLOWER until the partition is loaded
                    r = rpc(addr, "Produce", 9, corpus.produce(topic(name, epoch), p,
                                                               corpus.batch(2, first=2 * b)))
                    e = r["responses"][0]["partition_responses"][0]["error_code"]
                    if e not in (3, 6) or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                if e:
                    raise SystemExit(f"set-up produce {name}/{p} on {addr}: error {e}")
    fc = D.run_case(addr, {"api": "FindCoordinator", "version": 4,
                           "request": {"key_type": 0, "coordinator_keys": [generator.SETUP_GROUP]},
                           "retry": {"error_code": corpus.COORDINATOR_NOT_READY}})
    if fc["coordinators"][0]["error_code"]:
        raise SystemExit(f"set-up FindCoordinator on {addr}: {fc}")
    deadline = time.monotonic() + 30
    while True:
        oc = rpc(addr, "OffsetCommit", 8, {
            "group_id": generator.SETUP_GROUP, "generation_id_or_member_epoch": -1,
            "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic("gen-a", epoch), "partitions": [
                {"partition_index": p, "committed_offset": p + 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p in range(3)]}]})
        errs = {p["error_code"] for t in oc["topics"] for p in t["partitions"]}
        if errs == {0}:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"set-up OffsetCommit on {addr}: {oc}")
        time.sleep(0.5)
    return ids


MUTATING = {"Produce", "DeleteRecords", "CreatePartitions", "AlterConfigs",
            "IncrementalAlterConfigs", "CreateTopics", "DeleteTopics"}


def probe(addr, epoch):
    """The state of the set-up topics a mutating case may change: partition counts, first and
    next offsets, the configs the generator alters."""
    names = [topic(n, epoch) for n in generator.SETUP_TOPICS]
    md = rpc(addr, "Metadata", 12, corpus.metadata(*names))
    out = {"partitions": sorted((t["name"], len(t["partitions"])) for t in md["topics"])}
    for ts in (-1, -2):
        lo = rpc(addr, "ListOffsets", 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": n, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": ts} for p in range(parts)]}
            for n, (parts, _) in zip(names, generator.SETUP_TOPICS.values())]})
        out[ts] = sorted((t["name"], p["partition_index"], p["error_code"], p["offset"])
                         for t in lo["topics"] for p in t["partitions"])
    dc = rpc(addr, "DescribeConfigs", 4, {"resources": [
        {"resource_type": 2, "resource_name": topic("gen-cfg", epoch),
         "configuration_keys": generator.CONFIG_NAMES}],
        "include_synonyms": False, "include_documentation": False})
    out["configs"] = sorted((c["name"], c["value"]) for r in dc["results"] for c in r["configs"])
    return out


def versions(ours, kafka):
    """api -> (lo, hi): what kafka-python's schema, our broker and Kafka all serve."""
    adv = []
    for addr in (ours, kafka):
        out = rpc(addr, "ApiVersions", 3, {"client_software_name": "differential",
                                           "client_software_version": "1"})
        adv.append({k["api_key"]: (k["min_version"], k["max_version"]) for k in out["api_keys"]})
    res = {}
    for api in generator.APIS:
        cls = D.CLASSES.get(api + "Request")
        if cls is None:
            continue
        key = cls.API_KEY
        if key not in adv[0] or key not in adv[1]:
            continue
        lo = max(cls.valid_versions[0], adv[0][key][0], adv[1][key][0])
        hi = min(cls.valid_versions[1], adv[0][key][1], adv[1][key][1])
        if lo <= hi:
            res[api] = (lo, hi)
    return res


# -- the run --------------------------------------------------------------------------------

def compare(case, a, b, rows):
    """(explained, bugs, unexplained) differences of one case."""
    name, api, v = case["name"], case["api"], case["version"]
    explained, bugs, unexplained = [], [], []
    dup = has_duplicate(case["request"])
    for d in roots(D.diff(a, b)):
        for api_re, pred, path_re, reason in rows:
            if re.search(api_re, api) and pred(v) and re.search(path_re, d[0]):
                explained.append((d, reason))
                break
        else:
            for case_re, path_re, reason in D.BUGS:
                bug_api = next(c["api"] for c in corpus.CASES if re.search(case_re, c["name"]))
                if dup and bug_api == api and re.search(path_re, d[0]):
                    bugs.append((d, reason))
                    break
            else:
                unexplained.append(d)
    del name
    return explained, bugs, unexplained


def run(args, ours, kafka, t0):
    seed = args.seed
    rows = explained_rows() + GEN_EXPLAINED
    vers = versions(ours, kafka)
    ids_ours = setup(ours)
    ids_kafka = setup(kafka)
    print(f"set-up done ({time.monotonic() - t0:.1f} s); APIs and versions generated: "
          + ", ".join(f"{a} {lo}-{hi}" for a, (lo, hi) in sorted(vers.items())))
    if args.case is not None:
        first = 0 if args.with_prefix else args.case
        indices = range(first, args.case + 1)
    else:
        indices = range(args.generated)
    groups = OrderedDict()
    counts = {"same": 0, "explained": 0, "bug": 0, "DIFFERS": 0, "not encodable": 0}
    per_api = {}
    epoch, diverged = 0, []
    for i in indices:
        case = generator.generate(seed, i, vers, D.CLASSES)
        a = ask(ours, case, ids_ours, epoch)
        if a.get("outcome") == "not encodable":
            counts["not encodable"] += 1
            if args.verbose or args.case == i:
                print(f"not encodable {case['name']}: {a['_detail']}")
            continue
        b = ask(kafka, case, ids_kafka, epoch)
        explained, bugs, unexplained = compare(case, a, b, rows)
        status = ("DIFFERS" if unexplained else "bug" if bugs else
                  "explained" if explained else "same")
        counts[status] += 1
        per_api.setdefault(case["api"], [0, 0])[0] += 1
        if unexplained:
            per_api[case["api"]][1] += 1
        if args.case == i or args.verbose:
            print(f"{status:9} {case['name']} {case['api']} v{case['version']}")
        if case["api"] in MUTATING and (unexplained or bugs):
            po, pk = probe(ours, epoch), probe(kafka, epoch)
            if po != pk:
                epoch += 1
                diverged.append((i, case["api"], case["version"]))
                print(f"state diverged at case {i} ({case['api']} v{case['version']}): "
                      f"{[k for k in po if po[k] != pk[k]]}; fresh set-up topics (epoch {epoch})")
                ids_ours, ids_kafka = setup(ours, epoch), setup(kafka, epoch)
        if args.case == i:
            print(f"  request: {case['request']}\n  ours : {a}\n  kafka: {b}")
            for (p, x, y) in unexplained:
                print(f"    DIFFERS {p}: ours={D.short(x)} kafka={D.short(y)}")
            for (p, x, y), reason in bugs:
                print(f"    BUG (known) {p}: ours={D.short(x)} kafka={D.short(y)}: {reason}")
            for (p, x, y), reason in explained:
                print(f"    explained {p}: {reason}")
        for (p, x, y) in unexplained:
            key = (case["api"], general_path(p),
                   kind(p, x, y, has_duplicate(case["request"])))
            g = groups.get(key)
            if g is None:
                groups[key] = g = {"count": 0, "versions": set(), "case": i,
                                   "version": case["version"], "ours": x, "kafka": y}
            g["count"] += 1
            if ".configs.*" in key[1]:
                g.setdefault("names", set()).add(p.split(".configs.", 1)[1])
            g["versions"].add(case["version"])
    if args.case is None:
        severe = [k for k in groups if k[1] in ("outcome", "_detail")]
        print(f"\n{len(groups)} distinct differences in {sum(counts.values())} cases "
              f"(seed {seed}); replay one: scripts/differential.py --seed {seed} --case I "
              f"[--with-prefix]")
        order = severe + [k for k in groups if k not in severe]
        for k in order:
            g = groups[k]
            vs = sorted(g["versions"])
            print(f"- {k[0]} {k[1]}: {k[2]}  [{g['count']} case(s), v{','.join(map(str, vs))}]"
                  f"  e.g. case {g['case']} (v{g['version']}): ours={D.short(g['ours'], 120)} "
                  f"kafka={D.short(g['kafka'], 120)}"
                  + (f"  configs: {D.short(sorted(g['names']), 200)}" if g.get("names") else ""))
        print("per API (cases, with a difference): " + ", ".join(
            f"{a} {n}/{d}" for a, (n, d) in sorted(per_api.items())))
    print("summary: " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + f"; state diverged {len(diverged)} time(s)"
          + (f" (cases {', '.join(str(d[0]) for d in diverged[:20])})" if diverged else "")
          + f"; {time.monotonic() - t0:.1f} s")
    one_sided = [k for k in groups if k[1] == "outcome"]
    return 1 if one_sided else 0
