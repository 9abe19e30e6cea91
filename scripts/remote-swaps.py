#!/usr/bin/env python3
"""Swaps a remote bundle's object under load and checks every answer (scripts/bench-remote.sh).

Usage: remote-swaps.py SERVE_PORT WWW PAGES_FILE SWAPS CLIENTS RELEASE_1 SITE_1 RELEASE_2 SITE_2 [RELEASE_3 SITE_3 ...]

CLIENTS threads ask `packager serve` (which mounts WWW/release.zip from a web server by range reads, RELEASE_1 at the
start) for the pages in PAGES_FILE without pause; meanwhile the releases take turns as WWW/release.zip, in order, SWAPS
times, each written beside it and renamed over it (with its own modification time, so the web server's ETag changes).
The releases differ on every page. Every answer must be a 200 whose body is the page of one of the SITEs. A swap
counts as seen when a probe page answers with the new release's bytes; an answer asked for after that and before the
next rename must not be the release it replaced. (With four releases or more, an answer of the release after the next,
which a client thread that Python's lock held back could get, is not mistaken for the replaced one.) Prints:
requests failed neither old seen.
"""
import http.client
import os
import shutil
import sys
import threading
import time

port, www, pages_file = sys.argv[1:4]
swaps, clients = int(sys.argv[4]), int(sys.argv[5])
releases = sys.argv[6::2]
sites = sys.argv[7::2]
pages = [line.strip() for line in open(pages_file) if line.strip()]
expected = {page: [open(site + page, "rb").read() for site in sites] for page in pages}
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
        version = next((i for i, bytes_ in enumerate(expected[page]) if body == bytes_), None)
        with lock:
            results.append((asked, page, version, status))


threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for thread in threads:
    thread.start()
windows = []  # (detected at, next swap at, version)
probe_connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
current = 0
for swap in range(swaps):
    time.sleep(0.05)
    current = (current + 1) % len(releases)
    source = releases[current]
    staging = os.path.join(www, "next.zip")
    shutil.copyfile(source, staging)
    os.utime(staging, (1_700_000_000 + swap, 1_700_000_000 + swap))
    # Taken before the rename: an answer asked after it may already be the next release's.
    swapped = time.monotonic()
    os.rename(staging, os.path.join(www, "release.zip"))
    detected = None
    want = expected[probe][current]
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
    replaced = (version - 1) % len(releases)
    late = [r for r in results if detected < r[0] < upper and r[2] == replaced]
    stale += len(late)
    for r in late[:3]:
        print(f"old answer: asked {1000 * (r[0] - detected):.1f} ms after the swap was seen: {r[1]}", file=sys.stderr)
print(len(results), failed, neither, stale, len(windows))
