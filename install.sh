#!/bin/sh
# Install git-genjob into its own venv and link `git-genjob` into ~/.local/bin.
# Usage: ./install.sh [--dev] [--prefix DIR]    (safe to re-run)
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${GENJOB_PREFIX:-${XDG_DATA_HOME:-$HOME/.local/share}/git-genjob}
BIN=${GENJOB_BIN:-}
if [ -z "$BIN" ]; then
    # git finds `git genjob` (and `git genjob --help` its man page) only through PATH, so the
    # link goes to ~/.local/bin if PATH has it, else to the first directory of yours on PATH
    # that you can write (~/bin, say), else to ~/.local/bin with a git alias until PATH has it.
    BIN=$HOME/.local/bin
    case ":$PATH:" in
        *":$BIN:"*) ;;
        *)
            OLDIFS=$IFS; IFS=:
            for dir in $PATH; do
                case "$dir" in "$HOME"/*) [ -d "$dir" ] && [ -w "$dir" ] && { BIN=$dir; break; } ;; esac
            done
            IFS=$OLDIFS ;;
    esac
fi
EXTRA=""
while [ $# -gt 0 ]; do
    case "$1" in
        --dev) EXTRA="[dev]" ;;
        --prefix) shift; PREFIX=$1 ;;
        -h|--help) sed -n '2,3p' "$0" | sed 's/^# //'; exit 0 ;;
        *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "install.sh: python3 not found" >&2; exit 1; }
command -v git >/dev/null || { echo "install.sh: git not found" >&2; exit 1; }
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "install.sh: Python >= 3.11 needed" >&2; exit 1; }

if [ ! -x "$PREFIX/venv/bin/python" ]; then
    echo "creating venv in $PREFIX/venv"
    "$PY" -m venv "$PREFIX/venv"
fi
"$PREFIX/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$HERE$EXTRA"

mkdir -p "$BIN"
ln -sf "$PREFIX/venv/bin/git-genjob" "$BIN/git-genjob"

# man finds a page in DIR/../share/man for each DIR on PATH: beside the link, wherever it went
MANDIR=${GENJOB_MANDIR:-$(dirname "$BIN")/share/man}
if "$PREFIX/venv/bin/git-genjob" man --out "$MANDIR/man1" >/dev/null 2>&1; then
    echo "installed man page in $MANDIR/man1 (git genjob --help; if man does not find it: export MANPATH=\"$MANDIR:\$MANPATH\")"
fi

echo "installed git-genjob -> $BIN/git-genjob"
case ":$PATH:" in
    *":$BIN:"*) ;;
    *)
        # git finds `git genjob` on PATH only. Until the user adds $BIN there, a global alias
        # (which git consults only when no git-genjob is on PATH) makes the README's next
        # command work as typed; it cds back to the directory git was run from.
        ALIAS="!f() { cd \"\${GIT_PREFIX:-.}\" && exec '$BIN/git-genjob' \"\$@\"; }; f"
        CURRENT=$(git config --global --get alias.genjob 2>/dev/null || true)
        if [ -z "$CURRENT" ] || [ "$CURRENT" = "$ALIAS" ]; then
            git config --global alias.genjob "$ALIAS"
            echo "note: $BIN is not on PATH, so \`git genjob\` runs through a git alias for now (git config --global alias.genjob);"
            echo "      until PATH has it, git answers \`git genjob --help\` with the alias: \`git genjob -h\` and \`man -M $MANDIR git-genjob\` show the help"
        else
            echo "note: $BIN is not on PATH and alias.genjob is already set to something else (left alone)"
        fi
        echo "      add it to PATH for good:  export PATH=\"$BIN:\$PATH\"  (e.g. in ~/.profile), then: git config --global --unset alias.genjob"
        ;;
esac
