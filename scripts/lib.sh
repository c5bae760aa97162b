# Shared by scripts/run, scripts/ensemble and scripts/bench: create .venv on first use
# and (re)install zkcompat into it only when the packaging metadata changed since the
# last install (an editable install picks up source changes by itself).

# The Python that creates .venv: $PYTHON, else python3.11, else python3.
base_python() {
    local python="${PYTHON:-python3.11}"
    command -v "$python" >/dev/null 2>&1 || python=python3
    echo "$python"
}

_venv_stamp_wanted() {
    local root="$1"
    cat "$root/setup.cfg" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1
}

# What ensure_venv would install, as one phrase; nothing when .venv is up to date.
venv_plan() {
    local root="$1" venv="$1/.venv"
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "a virtualenv $venv ($(base_python) -m venv) with zkcompat and its" \
             "dependencies from PyPI (pip install -e $root)"
    elif [[ ! -x "$venv/bin/zkcompat" \
            || "$(cat "$venv/.zkcompat-run-stamp" 2>/dev/null)" != "$(_venv_stamp_wanted "$root")" ]]; then
        echo "zkcompat and its dependencies from PyPI into $venv (pip install -e $root)"
    fi
}

ensure_venv() {
    local root="$1" venv="$1/.venv" python
    python="$(base_python)"
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "$(basename "$0"): creating $venv with $("$python" --version 2>&1)" >&2
        "$python" -m venv "$venv"
    fi
    local stamp="$venv/.zkcompat-run-stamp" want
    want="$(_venv_stamp_wanted "$root")"
    if [[ ! -x "$venv/bin/zkcompat" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
        echo "$(basename "$0"): installing zkcompat into $venv" >&2
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root" 2>&1 \
            | grep -v -e BuildBackendWarning -e '^ *!!' -e '\*\*\*\*' -e 'Please be careful' \
                  -e 'name as your package' -e 'with strategy, WheelFile' -e '^ *$' >&2 || true
        "$venv/bin/zkcompat" --help >/dev/null  # fail here, clearly, if the install did not work
        echo "$want" > "$stamp"
    fi
}
