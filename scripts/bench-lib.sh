# Shared by the benchmark scripts (sourced, not run).

# start_nginx WORK ROOT LISTEN WORKERS [DIRECTIVES]: serves ROOT with nginx (access log off, sendfile, ETag) listening
# on LISTEN (address:port, optionally followed by "ssl http2"), from a config in WORK/nginx, with DIRECTIVES added to
# its server block (ssl_certificate …); waits until it answers. stop_nginx WORK stops it.
start_nginx() {
    local work=$1 root=$2 listen=$3 workers=$4 directives=${5:-}
    mkdir -p "$work/nginx"
    cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes $workers;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
user root;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    server { listen $listen; root $root; etag on; $directives }
}
NGINX
    nginx -c "$work/nginx/nginx.conf"
    local port=${listen##*:}
    local scheme=http
    case $listen in *" ssl"*) scheme=https ;; esac
    wait_for "$scheme://127.0.0.1:${port%% *}/"
}

stop_nginx() { nginx -c "$1/nginx/nginx.conf" -s stop 2>/dev/null || true; }

# make_test_ca DIR: a CA (DIR/ca.pem, ca.key) and a certificate it signed for 127.0.0.1 (DIR/server.pem, server.key).
make_test_ca() {
    local tls=$1
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" -days 2 -subj "/CN=Bench CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout "$tls/server.key" -out "$tls/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$tls/san.cnf"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -out "$tls/server.pem" -days 2 \
        -extfile "$tls/san.cnf" 2>/dev/null
}

# wait_for URL: until it answers (any status), for at most 10 s.
wait_for() { for _ in $(seq 100); do curl -sk -o /dev/null "$1" && return 0; sleep 0.1; done; echo "bench: $1 did not come up" >&2; return 1; }

# The machine line every report starts with: cores and CPU model.
machine() { echo "$(nproc) cores ($(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"; }

# pages_mix_lua SITE WORK: writes WORK/py-pages.txt (every HTML page of SITE, as a path) and WORK/py-mix.lua, a wrk
# script that asks for them in turn.
pages_mix_lua() {
    local site=$1 work=$2
    (cd "$site" && find . -name '*.html' | sed 's|^\.||' | sort) >"$work/py-pages.txt"
    cat >"$work/py-mix.lua" <<LUA
local pages = {}
for line in io.lines("$work/py-pages.txt") do pages[#pages + 1] = line end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", pages[(n % #pages) + 1])
end
LUA
}

# make_tiny_site ROOT COUNT: COUNT small files under ROOT (HTML pages of words, one in ten a small PNG of noise), in
# folders of 1000: the many-small-files site of the delta and remote benchmarks.
make_tiny_site() {
    python3 - "$1" "$2" <<'PY'
import os, random, sys
root, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(3)
words = "offline bundle serve request response header cache etag range gzip forecast station radar".split()
for i in range(count):
    folder = f"{root}/s{i // 1000}"
    if i % 1000 == 0: os.makedirs(folder, exist_ok=True)
    if i % 10 == 9:
        open(f"{folder}/t{i}.png", "wb").write(rng.randbytes(600 + i * 11 % 1200))
    else:
        open(f"{folder}/p{i}.html", "w").write("<p>" + " ".join(rng.choice(words) for _ in range(120 + i * 37 % 250)) + "</p>\n")
PY
}

# start_h2o WORK ROOT PORT [TLS_DIR]: serves ROOT with h2o (Debian's 2.2.5: one thread, no access log,
# `file.send-compressed: ON`, so a client that accepts gzip gets the .gz beside a file, as nginx's gzip_static gives it),
# on PORT, over TLS with TLS_DIR's server.pem and server.key when given (h2o then speaks HTTP/2 too, by ALPN), from a
# config in WORK/h2o-PORT; waits until it answers. stop_h2o WORK PORT stops it.
start_h2o() {
    local work=$1 root=$2 port=$3 tls=${4:-}
    local dir="$work/h2o-$port"
    mkdir -p "$dir"
    {
        echo "user: root"
        echo "num-threads: 1"
        echo "pid-file: $dir/h2o.pid"
        echo "error-log: $dir/error.log"
        echo "listen:"
        echo "  host: 127.0.0.1"
        echo "  port: $port"
        if [ -n "$tls" ]; then
            echo "  ssl:"
            echo "    certificate-file: $tls/server.pem"
            echo "    key-file: $tls/server.key"
        fi
        echo "hosts:"
        echo "  default:"
        echo "    paths:"
        echo "      /:"
        echo "        file.dir: $root"
        echo "        file.send-compressed: ON"
    } >"$dir/h2o.conf"
    h2o -c "$dir/h2o.conf" >"$dir/out.log" 2>&1 &
    local scheme=http
    [ -n "$tls" ] && scheme=https
    wait_for "$scheme://127.0.0.1:$port/"
}

stop_h2o() {
    local pid
    pid=$(cat "$1/h2o-$2/h2o.pid" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || true
}
