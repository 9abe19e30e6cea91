#!/usr/bin/env python3
"""Drives a fleet of `packager serve --channel` nodes through a channel's releases under load (scripts/bench-fleet.sh).

Usage: fleet-bench.py CONFIG.json

CONFIG names: packager (the binary), www (the web server's root, holding channel.json and releases/), key (the release
key), log (the web server's access log: "NODE URI STATUS BYTES" a line), ports (the nodes' ports), pages (paths to read),
marker (a page that says which release answers), clients (threads asking without pause), check (the nodes' poll
period, seconds), rtt (seconds), and steps: [{"name", "zip", "site"}] published in order (a step may name a release
published before: a rollback).

For each step: the release object goes to www/releases/<digest>.zip, `packager channel write --previous` names it, and
the driver waits until every node's marker page is the new release's (propagation); then every page is read through
every node; the access log says the bytes each node fetched for release objects, set beside the ideal (the new index,
the bodies no earlier step held, and 128 KiB; or with a delta from the release before, the delta and 128 KiB).
Meanwhile CLIENTS threads ask random nodes for random pages: every answer
must be a 200 with the bytes of one release, and none asked after a node was seen on a release may be of an older one.
Prints one JSON object.
"""
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import zipfile

config = json.load(open(sys.argv[1]))
packager, www, key, log = config["packager"], config["www"], config["key"], config["log"]
ports, pages, marker = config["ports"], config["pages"], config["marker"]
steps = config["steps"]
initial = config["initial"]  # the release the nodes serve at the start: {"zip", "site"}
releases = [initial["zip"]]  # distinct release zips in order of first publication
for step in steps:
    if step["zip"] not in releases:
        releases.append(step["zip"])
sites = {step["zip"]: step["site"] for step in steps}
sites[initial["zip"]] = initial["site"]
expected = {page: [open(sites[z] + page, "rb").read() for z in releases] for page in pages}


def digest(path):
    out = subprocess.run([packager, "inspect", path, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["digest"]


def bodies(path):
    """{body name: bytes of its local header and stored stream}, and the index's stored size."""
    with zipfile.ZipFile(path) as archive:
        out = {}
        index = 0
        for info in archive.infolist():
            if info.filename == "index.bin":
                index = info.compress_size
            elif info.filename.startswith("b/"):
                out[info.filename] = 30 + len(info.filename.encode()) + len(info.extra) + info.compress_size
        return out, index


lock = threading.Lock()
results = []  # (asked, node, page, version or None, status)
seen = {}  # node -> list of (seen at, version)
stop = threading.Event()


def connect(port):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


def get(connection, page):
    connection.request("GET", page)
    response = connection.getresponse()
    return response.status, response.read()


def version_of(page, body):
    return next((i for i, b in enumerate(expected[page]) if b == body), None)


def client(index):
    rng = random.Random(index)
    connections = {}
    while not stop.is_set():
        node = rng.randrange(len(ports))
        page = marker if rng.random() < 0.2 else rng.choice(pages)
        connection = connections.get(node) or connect(ports[node])
        connections[node] = connection
        asked = time.monotonic()
        try:
            status, body = get(connection, page)
        except Exception:
            connection.close()
            connections.pop(node, None)
            with lock:
                results.append((asked, node, page, None, 0))
            continue
        with lock:
            results.append((asked, node, page, version_of(page, body), status))


def log_size():
    return os.path.getsize(log) if os.path.exists(log) else 0


def fetched_since(offset):
    """Bytes and requests of release objects and deltas (not the channel) per node in the log past `offset`."""
    per_node = {}
    with open(log, "rb") as f:
        f.seek(offset)
        for line in f.read().decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 4 or not ("/releases/" in parts[1] or "/deltas/" in parts[1]):
                continue
            bytes_, requests = per_node.get(parts[0], (0, 0))
            per_node[parts[0]] = (bytes_ + int(parts[3]), requests + 1)
    return per_node


def read_everywhere(version):
    """Reads every page through every node (a thread each); returns the answers that were not `version`'s."""
    wrong = [0]

    def read_all(node):
        connection = connect(ports[node])
        for page in pages:
            try:
                status, body = get(connection, page)
            except Exception:
                connection.close()
                connection = connect(ports[node])
                status, body = 0, b""
            if status != 200 or body != expected[page][version]:
                with lock:
                    wrong[0] += 1

    readers = [threading.Thread(target=read_all, args=(node,)) for node in range(len(ports))]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    return wrong[0]


# Every node reads the first release whole before the steps (its cache then holds it, as a node's would).
warm_wrong = read_everywhere(0)
threads = [threading.Thread(target=client, args=(i,)) for i in range(config["clients"])]
for thread in threads:
    thread.start()
report = {"steps": []}
held = set(bodies(initial["zip"])[0])  # body names any earlier step's release held
published = {initial["zip"]: digest(initial["zip"])}
publish_times = []
previous = os.path.join(www, "channel.json")  # the shell wrote the first document
channel = os.path.join(www, "channel.json")
for number, step in enumerate(steps):
    version = releases.index(step["zip"])
    names, index = bodies(step["zip"])
    new_bytes = sum(size for name, size in names.items() if name not in held)
    ideal = index + new_bytes + 128 * 1024
    held |= set(names)
    if step["zip"] not in published:
        published[step["zip"]] = digest(step["zip"])
        shutil.copyfile(step["zip"], os.path.join(www, "releases", published[step["zip"]] + ".zip"))
    offset = log_size()
    arguments = [packager, "channel", "write", step["zip"], "--url", "releases/{digest}.zip", "--sign-key", key, "-o", channel]
    delta_size = None
    if step.get("delta"):
        # The delta from the release before: what a node that holds it fetches instead of the release's index and bodies.
        os.makedirs(os.path.join(www, "deltas"), exist_ok=True)
        name = os.path.basename(step["delta"])
        shutil.copyfile(step["delta"], os.path.join(www, "deltas", name))
        arguments += ["--delta", step["delta"], "--delta-url", "deltas/" + name]
        delta_size = os.path.getsize(step["delta"])
    if previous:
        arguments += ["--previous", channel]
    subprocess.run(arguments, check=True, capture_output=True)
    previous = channel
    written = time.monotonic()
    publish_times.append(written)
    # Propagation: until every node's marker page is this release's.
    want = expected[marker][version]
    pending = set(range(len(ports)))
    probes = {node: connect(ports[node]) for node in pending}
    propagation = None
    while pending and time.monotonic() - written < 60:
        for node in list(pending):
            try:
                status, body = get(probes[node], marker)
            except Exception:
                probes[node].close()
                probes[node] = connect(ports[node])
                continue
            if status == 200 and body == want:
                at = time.monotonic()
                pending.discard(node)
                with lock:
                    seen.setdefault(node, []).append((at, version, number))
        time.sleep(0.01)
    if not pending:
        propagation = time.monotonic() - written
    wrong = read_everywhere(version)
    time.sleep(0.2)
    per_node = fetched_since(offset)
    node_bytes = [per_node.get(f"n{node}", (0, 0))[0] for node in range(len(ports))]
    report["steps"].append(
        {
            "step": step["name"],
            "propagation": propagation,
            "nodes_behind": len(pending),
            "wrong_reads": wrong,
            "bytes_max": max(node_bytes),
            "bytes_min": min(node_bytes),
            "ideal": ideal,
            "index": index,
            "new_bodies": new_bytes,
            "delta": delta_size,
            "rollback": step.get("rollback", False),
        }
    )
stop.set()
for thread in threads:
    thread.join()
failed = sum(1 for r in results if r[4] != 200)
neither = sum(1 for r in results if r[4] == 200 and r[3] is None)
stale = 0
for node, sightings in seen.items():
    for at, version, number in sightings:
        # Asked after the node was seen on `version`, and before the next step was published.
        upper = publish_times[number + 1] if number + 1 < len(publish_times) else float("inf")
        later = [r for r in results if r[1] == node and at < r[0] < upper and r[3] is not None]
        # An answer is stale when its bytes are an older release's and not this one's.
        stale += sum(1 for r in later if expected[r[2]][r[3]] != expected[r[2]][version] and r[3] != version)
report.update({"warm_wrong": warm_wrong, "requests": len(results), "failed": failed, "neither": neither, "stale": stale})
print(json.dumps(report))
