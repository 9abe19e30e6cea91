#!/usr/bin/env python3
"""Faults an operator meets, injected into `packager serve` and `packager build` (docs/BENCHMARKS.md, issue 49):

1. SIGTERM under load: 20 downloads of a 40 MB body at 8 MB/s each (clients that hold a 64 KiB receive buffer, as a
   slow client far away does), the signal 1 s in. Counts the downloads that arrive whole, whether a connection made
   after the signal is refused, serve's exit status and how long it took to exit after the last download.
2. Damaged bodies: 100 bodies of 1 KiB to 16 MiB (log-uniform) and 5 of 20 MiB, one byte flipped in each, asked for
   once each from `serve`, then from `serve --scrub` once its scrub ran. Counts answers with status 200 and wrong
   bytes (a 200 cut short counts: its client holds bytes it must not use).
3. Killed builds: python3.11-doc's HTML served by nginx, built, then built again and killed with SIGKILL at a random
   moment N times, each resumed by the next run; the last run finishes. Counts bytes the origin sent again per resume
   (from nginx's access log) against the site's size, and compares the final bundle with an uninterrupted one.

Usage: scripts/faults.py BIN_FOLDER WORK OUTPUT.md [--quick]
"""
import hashlib
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile

bin_folder, work, out = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
quick = "--quick" in sys.argv
packager = os.path.join(bin_folder, "packager")
rng = random.Random(49)
machine = subprocess.run(["sh", "-c", "echo $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"], capture_output=True, text=True).stdout.strip()
configuration = "release" if "/release" in os.path.realpath(bin_folder) else "debug"
lines = [
    "## Faults: SIGTERM under load, damaged bodies, killed builds",
    "",
    f"scripts/bench-faults.sh on {machine}, {configuration} binaries. Counts, not speeds: what an operator's faults do.",
    "",
]


def start_serve(args):
    process = subprocess.Popen([packager, "serve", *args, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = process.stdout.readline()
    match = re.search(r"on (http://[0-9.]+:\d+)/", line)
    if not match:
        raise SystemExit(f"faults: serve did not start: {line}{process.stdout.read()}")
    return process, match.group(1)


def slow_get(base, path, rate, results, index):
    """GET base+path with a 64 KiB receive buffer, reading at `rate` bytes/s: (status, sha256 of the body, bytes)."""
    host, port = base.split("//")[1].split(":")
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.connect((host, int(port)))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        chunks, started, got = [], time.time(), 0
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            ahead = got / rate - (time.time() - started)
            if ahead > 0:
                time.sleep(ahead)
        data = b"".join(chunks)
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head else 0
        results[index] = (status, hashlib.sha256(body).hexdigest(), len(body))
    except OSError as error:
        results[index] = (0, str(error), 0)


def sigterm_under_load():
    folder = os.path.join(work, "sigterm")
    os.makedirs(folder + "/site")
    size = (8 if quick else 40) * 1000 * 1000
    body = rng.randbytes(size)
    with open(folder + "/site/big.bin", "wb") as f:
        f.write(body)
    subprocess.run([packager, "pack", folder + "/site", "--base-url", "https://big.example/", "-o", folder + "/b.zip"], check=True, capture_output=True)
    expected = hashlib.sha256(body).hexdigest()
    clients, rate = (5 if quick else 20), 8 * 1000 * 1000
    serve, base = start_serve([folder + "/b.zip", "--shutdown-grace", "25"])
    # Read once, so the body is trusted and goes out by sendfile, as on a server that has been up a while.
    subprocess.run(["curl", "-s", "-o", "/dev/null", base + "/big.bin"], check=True)
    results = [None] * clients
    threads = [threading.Thread(target=slow_get, args=(base, "/big.bin", rate, results, i)) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(1)
    serve.send_signal(signal.SIGTERM)
    signalled = time.time()
    time.sleep(0.2)
    late = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", base + "/big.bin"], capture_output=True, text=True)
    for t in threads:
        t.join()
    last = time.time()
    status = serve.wait(timeout=60)
    exited = time.time()
    whole = sum(1 for r in results if r and r[0] == 200 and r[1] == expected)
    lines.extend([
        f"### SIGTERM during {clients} downloads of a {size // 1000 // 1000} MB body at 8 MB/s each",
        "",
        "| downloads whole | connection after the signal | serve's exit status | exit after the last download | signal to exit |",
        "|---|---|---|---|---|",
        f"| {whole} of {clients} | {'refused' if late.returncode == 7 else 'answered ' + late.stdout} | {status} | "
        f"{exited - last:.2f} s | {exited - signalled:.1f} s |",
        "",
    ])


def body_offsets(path):
    """Where each body's stored bytes lie in the bundle: {entry name: (offset, size)}."""
    spans = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            if not info.filename.startswith("b/"):
                continue
            f.seek(info.header_offset + 26)
            name_length = int.from_bytes(f.read(2), "little")
            extra_length = int.from_bytes(f.read(2), "little")
            spans[info.filename] = (info.header_offset + 30 + name_length + extra_length, info.compress_size)
    return spans


def damaged_bodies():
    folder = os.path.join(work, "damaged")
    os.makedirs(folder + "/site")
    count = 20 if quick else 100
    sizes = [int(math.exp(rng.uniform(math.log(1024), math.log(16 << 20)))) for _ in range(count)] + [20 << 20] * (2 if quick else 5)
    originals = {}
    for n, size in enumerate(sizes):
        data = rng.randbytes(size)
        originals[f"/f{n}.bin"] = data
        with open(f"{folder}/site/f{n}.bin", "wb") as f:
            f.write(data)
    bundle = folder + "/b.zip"
    subprocess.run([packager, "pack", folder + "/site", "--base-url", "https://files.example/", "-o", bundle], check=True, capture_output=True)
    # One byte flipped somewhere in each body's stored bytes (random data is stored as it is).
    with open(bundle, "r+b") as f:
        for offset, size in body_offsets(bundle).values():
            at = offset + rng.randrange(size)
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x55]))

    def ask(base):
        wrong_200, statuses = 0, {}
        for path, data in originals.items():
            got = subprocess.run(["curl", "-s", "-o", folder + "/got", "-w", "%{http_code}", base + path], capture_output=True, text=True)
            statuses[got.stdout] = statuses.get(got.stdout, 0) + 1
            with open(folder + "/got", "rb") as f:
                received = f.read()
            if got.stdout == "200" and received != data:
                wrong_200 += 1
        return wrong_200, statuses

    rows = []
    for label, extra in [("serve", []), ("serve --scrub, after its scrub", ["--scrub"])]:
        serve, base = start_serve([bundle, *extra])
        if extra:
            for line in serve.stdout:
                if "scrubbed" in line:
                    break
        wrong, statuses = ask(base)
        serve.terminate()
        serve.wait()
        over = sum(1 for s in sizes if s > 16 << 20)
        rows.append(f"| {label} | {len(sizes)} ({over} over 16 MiB) | {wrong} | {', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))} |")
    lines.extend([
        "### Damaged bodies: one byte flipped in each",
        "",
        "| server | bodies asked for | 200 with wrong bytes | statuses |",
        "|---|---|---|---|",
        *rows,
        "",
    ])


def killed_builds():
    folder = os.path.join(work, "killed")
    os.makedirs(folder)
    docs = "/usr/share/doc/python3.11/html"
    if not os.path.isdir(docs):
        lines.extend(["### Killed builds", "", "python3.11-doc is not installed: not measured.", ""])
        return
    port = 8749
    log = folder + "/access.log"
    with open(folder + "/nginx.conf", "w") as f:
        f.write(f"""daemon off; pid {folder}/nginx.pid; error_log {folder}/error.log; worker_processes 1;
events {{}}
http {{ access_log {log} combined; log_format sized '$request_uri $body_bytes_sent'; include /etc/nginx/mime.types;
  server {{ listen 127.0.0.1:{port}; root {docs}; access_log {folder}/sized.log sized; }} }}
""")
    nginx = subprocess.Popen(["nginx", "-c", folder + "/nginx.conf", "-p", folder], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    seed = f"http://127.0.0.1:{port}/library/" if quick else f"http://127.0.0.1:{port}/index.html"
    env = dict(os.environ, SOURCE_DATE_EPOCH="1767225600")
    common = ["build", "--seed", seed, "--no-robots", "--concurrency", "8"]

    def logged():
        """(uri, bytes sent) of every request nginx logged so far, in order."""
        try:
            with open(folder + "/sized.log") as f:
                return [(line.split()[0], int(line.split()[-1])) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def sent():
        return sum(size for _, size in logged())

    started = time.time()
    reference = subprocess.run([packager, *common, "-o", folder + "/ref.zip"], env=env, capture_output=True, text=True)
    reference_seconds = time.time() - started
    if reference.returncode != 0:
        raise SystemExit("faults: the reference build failed: " + reference.stdout + reference.stderr)
    site_bytes = sent()
    kills = 5 if quick else 20
    refetched, again, kept = [], [], []
    asked_before = set()
    for _ in range(kills + 1):
        before = len(logged())
        if len(kept) == kills:
            final = subprocess.run([packager, *common, "-o", folder + "/site.zip"], env=env, capture_output=True, text=True)
            output = final.stdout + final.stderr
        else:
            process = subprocess.Popen(
                [packager, *common, "-o", folder + "/site.zip"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(rng.uniform(0.3, max(0.6, reference_seconds * 0.8)))
            process.send_signal(signal.SIGKILL)
            output = process.communicate()[0]
        match = re.search(r"resuming: (\d+) responses", output)
        kept.append(int(match.group(1)) if match else 0)
        run = logged()[before:]
        refetched.append(sum(size for _, size in run))
        # Fetched again: what an earlier run of this output had already been sent (in flight when it was killed, or
        # not kept).
        again.append(sum(size for uri, size in run if uri in asked_before))
        asked_before.update(uri for uri, _ in run)
    nginx.send_signal(signal.SIGQUIT)
    nginx.wait()
    same = final.returncode == 0 and open(folder + "/site.zip", "rb").read() == open(folder + "/ref.zip", "rb").read()
    journal_left = os.path.exists(folder + "/.site.zip.packager-journal")


    lines.extend([
        f"### Builds of python3.11-doc killed {kills} times and resumed",
        "",
        f"Site: {site_bytes / 1048576:.1f} MiB sent by nginx for an uninterrupted build ({reference_seconds:.1f} s). Each run was killed "
        "with SIGKILL at a random moment and the next one resumed; a last run finished.",
        "",
        "| run | responses kept from the runs before | MiB sent | of which sent before (fetched again) | fetched again, % of the site |",
        "|---|---|---|---|---|",
        *[f"| {n + 1}{' (last)' if n == kills else ''} | {k} | {r / 1048576:.1f} | {a / 1048576:.2f} | {100 * a / site_bytes:.1f} % |"
          for n, (k, r, a) in enumerate(zip(kept, refetched, again))],
        "",
        f"Final bundle equal to the uninterrupted one, byte for byte: {'yes' if same else 'NO'}; journal left after it: "
        f"{'yes' if journal_left else 'no'}. Worst resume: {100 * max(again) / site_bytes:.1f} % of the site fetched again; "
        f"in all, {sum(refetched) / 1048576:.1f} MiB sent over the {kills + 1} runs for a {site_bytes / 1048576:.1f} MiB site.",
        "",
    ])


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
sigterm_under_load()
damaged_bodies()
killed_builds()
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
