# Sourced by the benchmark scripts: find the load-test tools, installing the missing ones with
# apt-get (Debian 12: nginx 1.22, HAProxy 2.6, wrk). Usage: `need_tools nginx haproxy wrk`, then
# `$NGINX`, `$HAPROXY`, `$WRK` (empty when a tool is still missing). Needs `log` defined.

find_tool() { PATH="$PATH:/usr/sbin:/sbin" command -v "$1" || true; }

need_tools() {
    local missing=() tool
    for tool in "$@"; do
        [ -n "$(find_tool "$tool")" ] || missing+=("$tool")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing ${missing[*]} with apt-get"
        apt-get update -qq
        # RUNLEVEL=1 keeps the packages' init scripts from starting system-wide daemons.
        RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    NGINX="$(find_tool nginx)"
    HAPROXY="$(find_tool haproxy)"
    WRK="$(find_tool wrk)"
}
