#!/usr/bin/env bash
# .ci/run's install with pip and with uv, side by side (issue 17): the
# same packages into a new venv each time, no download cache for either,
# pip then uv, ROUNDS times (default 2). Run from the repository root:
#   bash benchmarks/bench_install.sh [ROUNDS]
# Prints each install's wall seconds, the load average at its start and
# how many packages it installed. pip's and uv's settings here are the
# machine's: uv gets pip's find-links and constraints as .ci/run passes
# them (pip_setting below is .ci/run's).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
venv=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "${venv}")"' EXIT

pip_setting() {
    local var
    var=PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')
    if [ -n "${!var:-}" ]; then echo "${!var}"; else "${venv}/bin/pip" config get "global.$1" 2>/dev/null || true; fi
}

for round in $(seq "${rounds}"); do
    for tool in pip uv; do
        rm -rf "${venv}" && python3 -m venv "${venv}"
        load=$(cut -d' ' -f1 /proc/loadavg)
        start=$(date +%s.%N)
        if [ "${tool}" = pip ]; then
            "${venv}/bin/pip" install --quiet --no-cache-dir --upgrade pip "setuptools>=77" 2>/dev/null
            PYTHONWARNINGS="ignore:Editable installation" "${venv}/bin/pip" install --quiet --no-cache-dir \
                --no-compile -e ".[service,test,jax]" "torch==2.13.0" 2>/dev/null
        else
            "${venv}/bin/pip" install --quiet --no-cache-dir uv 2>/dev/null
            args=(--index-strategy unsafe-best-match)
            for value in $(pip_setting find-links); do args+=(--find-links "${value}"); done
            for value in $(pip_setting constraint); do args+=(--constraint "${value}"); done
            SSL_CERT_FILE=${SSL_CERT_FILE:-$(pip_setting cert)} "${venv}/bin/uv" pip install --quiet --no-cache \
                --python "${venv}/bin/python" "${args[@]}" -e ".[service,test,jax]" "torch==2.13.0" "setuptools>=77" 2>/dev/null
        fi
        end=$(date +%s.%N)
        printf 'round %s  %-3s  %6.1f s  load %s  %s packages\n' "${round}" "${tool}" \
            "$(echo "${end} - ${start}" | bc)" "${load}" "$("${venv}/bin/python" -m pip list 2>/dev/null | tail -n +3 | wc -l)"
    done
done
