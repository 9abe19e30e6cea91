#!/usr/bin/env bash
# The security review's attacks, rerun on the release build with the targets of the second round, nginx beside
# `packager serve` where it is a peer: a client that pipelines requests and never reads (server memory growth, and
# after it left), many clients that never read a large body (memory, and whether each is closed by the timeout),
# random and malformed requests (the server still answers), a 4 GiB deflate bomb as index.bin (peak memory of
# `packager check --public-key`), a hostile origin (secrets in every form a URL can carry them, a gzip bomb).
#
#   scripts/bench-attack.sh PACKAGER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
packager=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$2
out=$3
quick=${4:-}
attack="$(cd "$(dirname "$0")" && pwd)/attack-serve.py"
readers=1000 bomb_gib=4 flood_seconds=10 fuzz_seconds=60 h2conns=200
[ "$quick" = "--quick" ] && readers=100 bomb_gib=1 flood_seconds=4 fuzz_seconds=10 h2conns=20
rm -rf "$work" && mkdir -p "$work/site"
work=$(cd "$work" && pwd)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; stop_nginx "$work"; stop_nginx "$work/tls"' EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# A page (60 KiB of text, deflated in the bundle) and a 64 MiB stored body.
python3 -c "import random;r=random.Random(7);w=['storm','radar','wind','rain'];open('$work/site/page.html','w').write(('<p>'+' '.join(r.choice(w)+str(r.randrange(1000)) for _ in range(9000)))[:60000])"
head -c 64M /dev/urandom >"$work/site/big.bin"
# A body the cache of whole answers keeps (up to 4 MiB), sent uncopied: the HTTP/2 row below asks 100 streams for it.
head -c 3M /dev/urandom >"$work/site/kept.bin"
"$packager" pack "$work/site" --base-url http://127.0.0.1:18701/ -o "$work/site.zip" >/dev/null
"$packager" serve "$work/site.zip" --port 18701 >/dev/null 2>&1 &
serve=$!
pids+=("$serve")
wait_for http://127.0.0.1:18701/page.html
start_nginx "$work" "$work/site" 127.0.0.1:18702 1
nginx_worker=$(pgrep -P "$(cat "$work/nginx/nginx.pid")" | head -1)

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
flood() { # PORT PID REQUEST
    python3 "$attack" flood --port "$1" --pid "$2" --request "$3" --seconds "$flood_seconds" --limit-mb 2048
}
cached='GET /page.html HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
unmatched='GET /page.html HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: "x"\r\n\r\n'
f1=$(flood 18701 "$serve" "$cached")
f2=$(flood 18701 "$serve" "$unmatched")
n1=$(flood 18702 "$nginx_worker" "$cached")
slow=$(python3 "$attack" slowread --port 18701 --pid "$serve" --connections "$readers" --request 'GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' --seconds 150)
nslow=$(python3 "$attack" slowread --port 18702 --pid "$nginx_worker" --connections "$readers" --request 'GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' --seconds 150)
fuzz=$(python3 "$attack" fuzz --port 18701 --pid "$serve" --seconds "$fuzz_seconds" --seed 1 || true)

# HTTP/2 over TLS: clients that open 100 streams each for the 64 MiB file and read nothing, against packager serve
# --tls-cert and nginx (ssl http2) with the same certificate.
tls=$work/tls
make_test_ca "$tls"
"$packager" serve "$work/site.zip" --port 18704 --tls-cert "$tls/server.pem" --tls-key "$tls/server.key" >/dev/null 2>&1 &
serve_tls=$!
pids+=("$serve_tls")
wait_for https://127.0.0.1:18704/page.html
start_nginx "$tls" "$work/site" "127.0.0.1:18705 ssl http2" 1 "ssl_certificate $tls/server.pem; ssl_certificate_key $tls/server.key;"
nginx_tls_worker=$(pgrep -P "$(cat "$tls/nginx/nginx.pid")" | head -1)
h2=$(python3 "$attack" h2streams --port 18704 --pid "$serve_tls" --ca "$tls/ca.pem" --connections "$h2conns" --streams 100 --path /big.bin --seconds 8)
nh2=$(python3 "$attack" h2streams --port 18705 --pid "$nginx_tls_worker" --ca "$tls/ca.pem" --connections "$h2conns" --streams 100 --path /big.bin --seconds 8)
h2_after=$(curl -s --http2 --cacert "$tls/ca.pem" -o /dev/null -w '%{http_version} %{http_code}' https://127.0.0.1:18704/page.html || true)
# The same clients for the 60 KB page, which packager serve keeps whole and answers on the HTTP/2 connection: first
# asked (twice) under the Host the attack sends, so that it is kept.
for _ in 1 2; do curl -s --http2 --cacert "$tls/ca.pem" -H 'Host: 127.0.0.1' -o /dev/null https://127.0.0.1:18704/page.html; done
h2kept=$(python3 "$attack" h2streams --port 18704 --pid "$serve_tls" --ca "$tls/ca.pem" --connections "$h2conns" --streams 100 --path /page.html --seconds 8)
nh2kept=$(python3 "$attack" h2streams --port 18705 --pid "$nginx_tls_worker" --ca "$tls/ca.pem" --connections "$h2conns" --streams 100 --path /page.html --seconds 8)
for _ in 1 2; do curl -s --http2 --cacert "$tls/ca.pem" -H 'Host: 127.0.0.1' -o /dev/null https://127.0.0.1:18704/kept.bin; done
h2kept3=$(python3 "$attack" h2streams --port 18704 --pid "$serve_tls" --ca "$tls/ca.pem" --connections "$h2conns" --streams 100 --path /kept.bin --seconds 8)
nh2kept3=$(python3 "$attack" h2streams --port 18705 --pid "$nginx_tls_worker" --ca "$tls/ca.pem" --connections "$h2conns" --streams 100 --path /kept.bin --seconds 8)

# index.bin deflated: BOMB_GIB GiB of zeros in a few MB, checked with a required key (read before the signature).
"$packager" keygen -o "$work/release" >/dev/null
python3 - "$work/bomb.zip" "$bomb_gib" <<'PY'
import sys, zipfile
info = zipfile.ZipInfo("index.bin"); info.compress_type = zipfile.ZIP_DEFLATED
with zipfile.ZipFile(sys.argv[1], "w", compresslevel=9) as z:
    z.comment = b"packager-bundle/2 sha256:" + b"0" * 64
    with z.open(info, "w", force_zip64=True) as f:
        block = b"\0" * (1 << 24)
        for _ in range(int(sys.argv[2]) * 64): f.write(block)
PY
bomb_size=$(stat -c %s "$work/bomb.zip")
bomb_said=$( { /usr/bin/time -f 'maxrss=%M' "$packager" check "$work/bomb.zip" --public-key "$work/release.pub" 2>&1 || true; } | tr '\n' ' ')
bomb_rss=$(echo "$bomb_said" | sed -n 's/.*maxrss=\([0-9]*\).*/\1/p')

# A hostile origin: a secret in a link, a requisite, a Link header, a redirect (percent-encoded once, twice, with
# `+` for a space) and a gzip bomb (512 MiB of HTML in about 4.5 MB; 64 MiB with --quick).
bomb_mib=512 under_mib=200
[ "$quick" = "--quick" ] && bomb_mib=64 under_mib=32
cat >"$work/origin.py" <<'PY'
import http.server, random, sys, zlib
SECRET, BOMB, UNDER = "supersecret123", int(sys.argv[2]), int(sys.argv[3])
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        if self.path == "/":
            body = ('<a href="/login">in</a><a href="/x?token=%s">x</a><a href="/y?t=super%%2573ecret123">y</a>'
                    '<img src="/p/supersecre%%74123/i.png"><a href="/q?a=Bearer+%s">q</a><a href="/bomb">b</a>' % (SECRET, SECRET)).encode()
            self.send(200, body, [("Content-Type", "text/html"), ("Link", "</p?t=supersecre%74123>; rel=preload")])
        elif self.path == "/login":
            self.send(302, b"", [("Location", "/cb?code=supersecre%74123")])
        elif self.path in ("/bomb", "/under"):
            r, c, out = random.Random(1), zlib.compressobj(9, zlib.DEFLATED, 31), []
            block = bytearray(b"<p>" * 171)
            for i in range((BOMB if self.path == "/bomb" else UNDER) * 2048):
                block[r.randrange(len(block))] = 0x61 + r.randrange(26)
                out.append(c.compress(bytes(block)))
            out.append(c.flush())
            self.send(200, b"".join(out), [("Content-Type", "text/html"), ("Content-Encoding", "gzip")])
        else:
            self.send(404, b"no")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$work/origin.py" 18703 "$bomb_mib" "$under_mib" &
pids+=($!)
wait_for http://127.0.0.1:18703/
printf 'output: %s/hostile.zip\nseeds: [http://127.0.0.1:18703/]\nheaders:\n  Authorization: Bearer ${TOK}\ntimeouts: {request: 120s}\nretries: {attempts: 0}\n' "$work" >"$work/hostile.yml"
build_said=$( { TOK=supersecret123 /usr/bin/time -f 'maxrss=%M' "$packager" build "$work/hostile.yml" --json >"$work/hostile.json" 2>"$work/hostile.err" || true; cat "$work/hostile.err"; } | tr '\n' ' ')
build_rss=$(echo "$build_said" | sed -n 's/.*maxrss=\([0-9]*\).*/\1/p')
secrets=0
for form in supersecret123 supersecre%74123 super%2573ecret123; do
    for file in "$work/hostile.zip" "$work/hostile.json" "$work/hostile.err"; do
        [ -f "$file" ] && secrets=$((secrets + $( (grep -a -o -F "$form" "$file" || true) | wc -l)))
    done
done
printf 'output: %s/under.zip\nurls: [http://127.0.0.1:18703/under]\ntimeouts: {request: 120s}\n' "$work" >"$work/under.yml"
under_said=$( { /usr/bin/time -f 'maxrss=%M' "$packager" build "$work/under.yml" 2>&1 || true; } | tr '\n' ' ')
under_rss=$(echo "$under_said" | sed -n 's/.*maxrss=\([0-9]*\).*/\1/p')
under_stored=$(test -f "$work/under.zip" && echo "stored ($(stat -c %s "$work/under.zip") bytes)" || echo "not stored")
bomb_failed=$(python3 -c "import json;r=json.load(open('$work/hostile.json'));print(sum(1 for f in r.get('failures',[]) if f['url'].endswith('/bomb')))" 2>/dev/null || echo "?")

mib() { python3 -c "print(f'{float(\"$1\"):.1f}')"; }
{
    echo "## Security: the review's attacks on the release build"
    echo
    echo "Run by \`make bench\` (scripts/bench-attack.sh, scripts/attack-serve.py) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "packager serve and nginx (1 worker, sendfile) serve the same 60 KB page and 64 MiB file on loopback; memory is the server's RSS."
    echo
    echo "| attack | packager serve | nginx | target |"
    echo "|---|---|---|---|"
    echo "| one client pipelining \`GET /page.html\` for ${flood_seconds} s, never reading: growth (after it left) | +$(mib "$(field "$f1" growth_mb)") MiB ($(mib "$(field "$f1" after_close_rss_mb)") MiB), $(field "$f1" requests_sent) requests sent | +$(mib "$(field "$n1" growth_mb)") MiB, $(field "$n1" requests_sent) requests sent | ≤ 64 MiB |"
    echo "| the same with \`If-None-Match: \"x\"\` (read each time) | +$(mib "$(field "$f2" growth_mb)") MiB ($(mib "$(field "$f2" after_close_rss_mb)") MiB) | - | ≤ 64 MiB |"
    echo "| $readers clients asking for the 64 MiB file, never reading: peak RSS; closed; seconds until all closed | $(mib "$(field "$slow" peak_rss_mb)") MiB; $(field "$slow" closed) of $readers; $(field "$slow" seconds_until_all_closed) | $(mib "$(field "$nslow" peak_rss_mb)") MiB; $(field "$nslow" closed) of $readers; $(field "$nslow" seconds_until_all_closed) | ≤ 256 MiB, all closed by the 60 s timeout (within two periods) |"
    echo "| $h2conns HTTP/2 clients over TLS, 100 streams each for the 64 MiB file, never reading: peak RSS (growth); then a request | $(mib "$(field "$h2" peak_rss_mb)") MiB (+$(python3 -c "print(f'{$(field "$h2" peak_rss_mb) - $(field "$h2" base_rss_mb):.1f}')") MiB); HTTP/$h2_after | $(mib "$(field "$nh2" peak_rss_mb)") MiB (+$(python3 -c "print(f'{$(field "$nh2" peak_rss_mb) - $(field "$nh2" base_rss_mb):.1f}')") MiB) | ≤ 256 MiB; answered |"
    echo "| the same for the 60 KB page (kept whole by packager serve, answered on the connection): peak RSS (growth) | $(mib "$(field "$h2kept" peak_rss_mb)") MiB (+$(python3 -c "print(f'{$(field "$h2kept" peak_rss_mb) - $(field "$h2kept" base_rss_mb):.1f}')") MiB) | $(mib "$(field "$nh2kept" peak_rss_mb)") MiB (+$(python3 -c "print(f'{$(field "$nh2kept" peak_rss_mb) - $(field "$nh2kept" base_rss_mb):.1f}')") MiB) | ≤ 256 MiB |"
    echo "| the same for a 3 MiB body (kept whole, at most 4 MiB of kept bodies in flight a connection): peak RSS (growth) | $(mib "$(field "$h2kept3" peak_rss_mb)") MiB (+$(python3 -c "print(f'{$(field "$h2kept3" peak_rss_mb) - $(field "$h2kept3" base_rss_mb):.1f}')") MiB) | $(mib "$(field "$nh2kept3" peak_rss_mb)") MiB (+$(python3 -c "print(f'{$(field "$nh2kept3" peak_rss_mb) - $(field "$nh2kept3" base_rss_mb):.1f}')") MiB) | ≤ 256 MiB |"
    echo "| ${fuzz_seconds} s of random, malformed and pipelined requests (4 clients, seed 1) | alive: $(field "$fuzz" alive), $(field "$fuzz" requests) requests | - | alive |"
    echo "| \`check --public-key\` of a ${bomb_gib} GiB deflate bomb as index.bin ($bomb_size bytes) | peak $((bomb_rss / 1024)) MiB | - | refused, < 64 MiB |"
    echo "| \`build\` of a hostile origin: secrets in any file it wrote (bundle, JSON report, stderr) | $secrets | - | 0 |"
    echo "| same build: a ${bomb_mib} MiB gzip bomb (refused past scope.max-body, 256 MiB); peak RSS | failed: $bomb_failed; peak $((build_rss / 1024)) MiB | - | refused |"
    echo "| \`build\` of a ${under_mib} MiB gzip bomb under scope.max-body (read in chunks, not mapped); peak RSS | $under_stored; peak $((under_rss / 1024)) MiB | - | ≤ 64 MiB (the review: 2× the decoded size) |"
    echo
    echo "check said: \`$(echo "$bomb_said" | sed 's/ *maxrss=[0-9]*//' | cut -c1-200)\`"
} >"$out"
cat "$out"
