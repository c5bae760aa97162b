# Shared by scripts/run and scripts/bench: create .venv on first use and (re)install
# zkcompat into it only when the packaging metadata changed since the last install
# (an editable install picks up source changes by itself).
ensure_venv() {
    local root="$1" venv="$1/.venv" python="${PYTHON:-python3.11}"
    command -v "$python" >/dev/null 2>&1 || python=python3
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "$(basename "$0"): creating $venv with $("$python" --version 2>&1)" >&2
        "$python" -m venv "$venv"
    fi
    local stamp="$venv/.zkcompat-run-stamp" want
    want="$(cat "$root/setup.cfg" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)"
    if [[ ! -x "$venv/bin/zkcompat" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
        echo "$(basename "$0"): installing zkcompat into $venv" >&2
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root" 2>&1 \
            | grep -v -e BuildBackendWarning -e '^ *!!' -e '\*\*\*\*' -e 'Please be careful' \
                  -e 'name as your package' -e 'with strategy, WheelFile' -e '^ *$' >&2 || true
        "$venv/bin/zkcompat" --help >/dev/null  # fail here, clearly, if the install did not work
        echo "$want" > "$stamp"
    fi
}
