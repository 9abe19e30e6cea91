#!/usr/bin/env bash
# Starts one real web server on 127.0.0.1 serving a folder, for tests and benchmarks.
#
#   scripts/origin.sh start KIND ROOT PORT STATEDIR   start it in the background, wait until it answers on
#                                                     http://127.0.0.1:PORT/, write its pid to STATEDIR/pid
#   scripts/origin.sh stop STATEDIR                   stop it (its whole process group) and wait until it is gone
#   scripts/origin.sh kinds                           the kinds whose server is installed here, one per line
#
# KIND: nginx, nginx-gzip, apache, apache-deflate, lighttpd, lighttpd-deflate, caddy, caddy-gzip. The -gzip and
# -deflate kinds compress text types on the fly. Every server runs in the foreground (in its own session, so that
# stop can signal the whole group) from a config written to STATEDIR, and keeps its logs, pid and temp files there.
# Each serves index.html for directories and the media types of /etc/mime.types. Apache drops root for www-data, so
# ROOT (and the path to it) must be readable by www-data: a `mktemp -d` folder is 0700 and needs a chmod 755. The
# others run as root. lighttpd-deflate needs Debian's lighttpd-mod-deflate package.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

ALL_KINDS="nginx nginx-gzip apache apache-deflate lighttpd lighttpd-deflate caddy caddy-gzip"
# What the compressing kinds compress (text/html is always compressed by nginx, so it is not listed for it).
COMPRESS_TYPES="text/html text/css text/plain text/xml text/javascript application/javascript application/json application/xml image/svg+xml"

die() { echo "origin.sh: $*" >&2; exit 1; }

binary() {
    case $1 in
        nginx | nginx-gzip) echo nginx ;;
        apache | apache-deflate) echo apache2 ;;
        lighttpd | lighttpd-deflate) echo lighttpd ;;
        caddy | caddy-gzip) echo caddy ;;
        *) return 1 ;;
    esac
}

# available KIND: its server (and, for lighttpd-deflate, Debian's separate lighttpd-mod-deflate) is installed.
available() {
    command -v "$(binary "$1")" >/dev/null && [[ $1 != lighttpd-deflate || -f /usr/lib/lighttpd/mod_deflate.so ]]
}

# "extension type" for each extension of /etc/mime.types, the first type listing it (in any case) winning.
mime_pairs() { awk '!/^#/ { for (i = 2; i <= NF; i++) if (!seen[tolower($i)]++) print $i, $1 }' /etc/mime.types; }

nginx_config() { # KIND ROOT PORT STATE
    local gzip=""
    [[ $1 == nginx-gzip ]] && gzip="gzip on; gzip_vary on; gzip_min_length 20; gzip_types ${COMPRESS_TYPES#text/html };"
    cat <<EOF
daemon off;
user root;
worker_processes auto;
pid $4/nginx.pid;
error_log $4/error.log;
events { worker_connections 1024; }
http {
    types {
$(mime_pairs | awk '{ print "        " $2, $1 ";" }')
    }
    types_hash_max_size 4096;
    types_hash_bucket_size 128;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    client_body_temp_path $4/tmp/body;
    proxy_temp_path $4/tmp/proxy;
    fastcgi_temp_path $4/tmp/fastcgi;
    uwsgi_temp_path $4/tmp/uwsgi;
    scgi_temp_path $4/tmp/scgi;
    $gzip
    server { listen 127.0.0.1:$3; root $2; index index.html; }
}
EOF
}

apache_config() { # KIND ROOT PORT STATE
    local m=/usr/lib/apache2/modules
    cat <<EOF
ServerRoot $4
ServerName 127.0.0.1
Listen 127.0.0.1:$3
PidFile $4/apache.pid
DefaultRuntimeDir $4
ErrorLog $4/error.log
User www-data
Group www-data
LoadModule mpm_event_module $m/mod_mpm_event.so
LoadModule authz_core_module $m/mod_authz_core.so
LoadModule mime_module $m/mod_mime.so
LoadModule dir_module $m/mod_dir.so
TypesConfig /etc/mime.types
DocumentRoot $2
<Directory $2>
    Require all granted
</Directory>
DirectoryIndex index.html
EOF
    [[ $1 == apache-deflate ]] && cat <<EOF
LoadModule filter_module $m/mod_filter.so
LoadModule deflate_module $m/mod_deflate.so
AddOutputFilterByType DEFLATE $COMPRESS_TYPES
EOF
    return 0
}

lighttpd_config() { # KIND ROOT PORT STATE
    cat <<EOF
server.document-root = "$2"
server.bind = "127.0.0.1"
server.port = $3
server.errorlog = "$4/error.log"
server.upload-dirs = ( "$4/tmp" )
# lighttpd trusts a file's cached stat for about a second; tests edit a page and ask again at once.
server.stat-cache-engine = "disable"
index-file.names = ( "index.html" )
mimetype.assign = (
$(mime_pairs | awk '{ print "    \"." $1 "\" => \"" $2 "\"," }')
)
EOF
    [[ $1 == lighttpd-deflate ]] && cat <<EOF
server.modules += ( "mod_deflate" )
deflate.allowed-encodings = ( "gzip", "deflate" )
deflate.min-compress-size = 20
deflate.mimetypes = ( $(printf '"%s", ' $COMPRESS_TYPES) )
EOF
    return 0
}

caddy_config() { # KIND ROOT PORT STATE (indented with tabs, as caddy fmt wants)
    local encode=""
    [[ $1 == caddy-gzip ]] && encode=$'\n\tencode {\n\t\tgzip\n\t\tminimum_length 20\n\t}'
    cat <<EOF
{
	admin off
	auto_https off
}

http://127.0.0.1:$3 {
	root * $2$encode
	file_server
}
EOF
}

start() {
    local kind=$1 root=$2 port=$3 state=$4 bin
    bin=$(binary "$kind") || die "unknown kind $kind (kinds: $ALL_KINDS)"
    available "$kind" || die "$kind is not installed here"
    [[ -d $root ]] || die "no folder $root"
    root=$(cd "$root" && pwd -P)
    mkdir -p "$state/tmp"
    state=$(cd "$state" && pwd -P)
    : >"$state/error.log"
    if (: <>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "something already listens on 127.0.0.1:$port"; fi
    if [[ $bin == apache2 ]] && ! runuser -u www-data -- test -r "$root" -a -x "$root"; then
        die "www-data (apache's user) cannot read $root"
    fi
    local cmd
    case $bin in
        nginx) nginx_config "$kind" "$root" "$port" "$state" >"$state/nginx.conf"
            cmd=(nginx -p "$state" -e "$state/error.log" -c "$state/nginx.conf") ;;
        apache2) apache_config "$kind" "$root" "$port" "$state" >"$state/apache.conf"
            cmd=(apache2 -f "$state/apache.conf" -DFOREGROUND) ;;
        lighttpd) lighttpd_config "$kind" "$root" "$port" "$state" >"$state/lighttpd.conf"
            cmd=(lighttpd -D -f "$state/lighttpd.conf") ;;
        caddy) caddy_config "$kind" "$root" "$port" "$state" >"$state/Caddyfile"
            cmd=(env HOME="$state" XDG_DATA_HOME="$state/data" XDG_CONFIG_HOME="$state/config"
                caddy run --adapter caddyfile --config "$state/Caddyfile") ;;
    esac
    # Not a process-group leader, setsid execs the server in place: $! is the server, and the leader of its group.
    # Descriptors the caller left open (a test runner's output pipe) would be held by the server until it stops, and the
    # caller would wait for their end: the server gets only its own three.
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            [[ $fd -gt 2 ]] && eval "exec $fd>&-" 2>/dev/null
        done
        exec setsid "${cmd[@]}" </dev/null >"$state/console.log" 2>&1
    ) &
    local pid=$!
    echo "$pid" >"$state/pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
            kill -0 "$pid" 2>/dev/null && return 0
            break
        fi
        sleep 0.1
    done
    echo "origin.sh: $kind did not come up on 127.0.0.1:$port; its logs:" >&2
    cat "$state/console.log" "$state/error.log" >&2
    stop "$state"
    exit 1
}

stop() {
    local state=$1 pid
    [[ -f $state/pid ]] || die "no $state/pid"
    pid=$(<"$state/pid")
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 -- "-$pid" 2>/dev/null || { rm -f "$state/pid"; return 0; }
        sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$state/pid"
}

case ${1:-} in
    start) [[ $# == 5 ]] || die "usage: origin.sh start KIND ROOT PORT STATEDIR"; start "$2" "$3" "$4" "$5" ;;
    stop) [[ $# == 2 ]] || die "usage: origin.sh stop STATEDIR"; stop "$2" ;;
    kinds) for k in $ALL_KINDS; do available "$k" && echo "$k"; done; true ;;
    *) die "usage: origin.sh start KIND ROOT PORT STATEDIR | stop STATEDIR | kinds" ;;
esac
