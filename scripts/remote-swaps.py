#!/usr/bin/env python3
"""Swaps a remote bundle's object under load and checks every answer (scripts/bench-remote.sh).

Usage: remote-swaps.py SERVE_PORT WWW RELEASE_A RELEASE_B SITE_A SITE_B PAGES_FILE SWAPS CLIENTS

CLIENTS threads ask `packager serve` (which mounts WWW/release.zip from a web server by range reads) for the pages in
PAGES_FILE without pause; meanwhile RELEASE_A and RELEASE_B take turns as WWW/release.zip, SWAPS times, each written
beside it and renamed over it (with its own modification time, so the web server's ETag changes). Every answer must be
a 200 whose body is the page of SITE_A or of SITE_B (the two releases differ on every page). A swap counts as detected
when a probe page answers with the new release's bytes; an answer asked for after that and before the next swap must
be the new release's. Prints: requests failed neither stale detected.
"""
import http.client
import os
import shutil
import sys
import threading
import time

port, www, release_a, release_b, site_a, site_b, pages_file = sys.argv[1:8]
swaps, clients = int(sys.argv[8]), int(sys.argv[9])
pages = [line.strip() for line in open(pages_file) if line.strip()]
expected = {}
for page in pages:
    a = open(site_a + page, "rb").read()
    b = open(site_b + page, "rb").read()
    expected[page] = (a, b)
probe = pages[0]

lock = threading.Lock()
results = []  # (asked at, page, version or None, status)
stop = threading.Event()


def get(connection, page):
    connection.request("GET", page)
    response = connection.getresponse()
    return response.status, response.read()


def client(index):
    connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    n = index
    while not stop.is_set():
        n = (n + 7) % len(pages)
        page = pages[n]
        asked = time.monotonic()
        try:
            status, body = get(connection, page)
        except Exception:
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
            with lock:
                results.append((asked, page, None, 0))
            continue
        a, b = expected[page]
        version = "a" if body == a else "b" if body == b else None
        with lock:
            results.append((asked, page, version, status))


threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for thread in threads:
    thread.start()
windows = []  # (detected at, next swap at, version)
probe_connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
current = "a"
for swap in range(swaps):
    time.sleep(0.05)
    current = "b" if current == "a" else "a"
    source = release_b if current == "b" else release_a
    staging = os.path.join(www, "next.zip")
    shutil.copyfile(source, staging)
    os.utime(staging, (1_700_000_000 + swap, 1_700_000_000 + swap))
    # Taken before the rename: an answer asked after it may already be the next release's.
    swapped = time.monotonic()
    os.rename(staging, os.path.join(www, "release.zip"))
    detected = None
    want = expected[probe][0 if current == "a" else 1]
    while time.monotonic() - swapped < 5:
        try:
            status, body = get(probe_connection, probe)
        except Exception:
            probe_connection.close()
            probe_connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
            continue
        if body == want:
            detected = time.monotonic()
            break
        time.sleep(0.005)
    if windows:
        windows[-1] = (windows[-1][0], swapped, windows[-1][2])
    if detected is not None:
        windows.append((detected, None, current))
stop.set()
for thread in threads:
    thread.join()
end = time.monotonic()
failed = sum(1 for r in results if r[3] != 200)
neither = sum(1 for r in results if r[3] == 200 and r[2] is None)
stale = 0
for detected, next_swap, version in windows:
    upper = next_swap if next_swap is not None else end
    late = [r for r in results if detected < r[0] < upper and r[2] is not None and r[2] != version]
    stale += len(late)
    for r in late[:3]:
        print(f"old answer: asked {1000 * (r[0] - detected):.1f} ms after the swap was seen: {r[1]}", file=sys.stderr)
print(len(results), failed, neither, stale, len(windows))
