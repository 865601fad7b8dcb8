#!/bin/sh
# Install git-genjob into its own venv; link `git-genjob` into ~/.local/bin (or PREFIX/bin).
# Usage: ./install.sh [--dev] [--prefix DIR] | ./install.sh --uninstall [--prefix DIR]
#   PREFIX (default ~/.local): bin/git-genjob, share/man/man1, share/bash-completion, and the
#   venv in share/git-genjob. Safe to re-run. Writes nowhere else (a manifest lists it all).
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-$HOME/.local}
UNINSTALL=""
EXTRA=""
while [ $# -gt 0 ]; do
    case "$1" in
        --dev) EXTRA="[dev]" ;;
        --prefix)
            [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }
            shift; PREFIX=$1 ;;
        --uninstall) UNINSTALL=1 ;;
        -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see ./install.sh -h)" >&2; exit 2 ;;
    esac
    shift
done
case "$PREFIX" in /*) ;; *) PREFIX=$(pwd)/$PREFIX ;; esac
BIN=${GENJOB_BIN:-$PREFIX/bin}
DATA=${GENJOB_PREFIX:-$PREFIX/share/git-genjob}
MANDIR=${GENJOB_MANDIR:-$PREFIX/share/man}
COMPDIR=$PREFIX/share/bash-completion/completions
MANIFEST=$DATA/manifest
ALIAS="!f() { cd \"\${GIT_PREFIX:-.}\" && exec '$BIN/git-genjob' \"\$@\"; }; f"

if [ -n "$UNINSTALL" ]; then
    # Exactly what the manifest lists, each only while it is still what install.sh made.
    [ -f "$MANIFEST" ] || { echo "install.sh: nothing to uninstall: no $MANIFEST" >&2; exit 1; }
    while IFS= read -r line; do
        kind=${line%% *}; path=${line#* }
        case "$kind" in
            link) if [ -L "$path" ] && [ "$(readlink "$path")" = "$DATA/venv/bin/git-genjob" ]; then rm -f "$path"; echo "removed $path"; fi ;;
            file) if [ -f "$path" ] && { [ "$path" = "$MANDIR/man1/git-genjob.1" ] || [ "$path" = "$COMPDIR/git-genjob" ]; }; then rm -f "$path"; echo "removed $path"; fi ;;
            alias)
                if [ "$(git config --global --get alias.genjob 2>/dev/null || true)" = "$ALIAS" ]; then
                    git config --global --unset alias.genjob && echo "removed git config --global alias.genjob"
                fi ;;
        esac
    done < "$MANIFEST"
    rm -rf "$DATA/venv"
    rm -f "$MANIFEST"
    rmdir "$DATA" 2>/dev/null || true
    echo "uninstalled git-genjob (venv $DATA/venv)"
    exit 0
fi

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "install.sh: python3 not found" >&2; exit 1; }
command -v git >/dev/null || { echo "install.sh: git not found" >&2; exit 1; }
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "install.sh: Python >= 3.11 needed" >&2; exit 1; }

if [ ! -x "$DATA/venv/bin/python" ]; then
    echo "creating venv in $DATA/venv"
    "$PY" -m venv "$DATA/venv"
fi
"$DATA/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$HERE$EXTRA"
GENJOB=$DATA/venv/bin/git-genjob
NEW=$MANIFEST.new
: > "$NEW"

if [ -e "$BIN/git-genjob" ] && ! { [ -L "$BIN/git-genjob" ] && [ "$(readlink "$BIN/git-genjob")" = "$GENJOB" ]; }; then
    echo "install.sh: $BIN/git-genjob exists and is not this installation's link (left alone)" >&2
    echo "  remove it, or choose another place: ./install.sh --prefix DIR" >&2
    rm -f "$NEW"; exit 1
fi
mkdir -p "$BIN"
ln -sfn "$GENJOB" "$BIN/git-genjob"
echo "link $BIN/git-genjob" >> "$NEW"

# man finds a page in DIR/../share/man for each DIR on PATH: PREFIX/share/man beside PREFIX/bin
if "$GENJOB" man --out "$MANDIR/man1" >/dev/null 2>&1; then
    echo "file $MANDIR/man1/git-genjob.1" >> "$NEW"
    echo "installed man page in $MANDIR/man1 (git genjob --help; if man does not find it: export MANPATH=\"$MANDIR:\$MANPATH\")"
fi
# bash-completion loads it for `git-genjob`, and git's completion for `git genjob` (_git_genjob)
mkdir -p "$COMPDIR"
"$GENJOB" completion bash > "$COMPDIR/git-genjob"
echo "file $COMPDIR/git-genjob" >> "$NEW"
echo "installed bash completion in $COMPDIR/git-genjob (zsh: git genjob completion zsh)"

echo "installed git-genjob -> $BIN/git-genjob"
case ":$PATH:" in
    *":$BIN:"*)  # an alias an earlier run set is still this installation's to remove
        [ "$(git config --global --get alias.genjob 2>/dev/null || true)" = "$ALIAS" ] && echo "alias genjob" >> "$NEW" ;;
    *)
        # git finds `git genjob` on PATH only. Until the user adds $BIN there, a global alias
        # (which git consults only when no git-genjob is on PATH) makes the README's next
        # command work as typed; it cds back to the directory git was run from.
        CURRENT=$(git config --global --get alias.genjob 2>/dev/null || true)
        if [ -z "$CURRENT" ] || [ "$CURRENT" = "$ALIAS" ]; then
            git config --global alias.genjob "$ALIAS"
            echo "alias genjob" >> "$NEW"
            echo "note: $BIN is not on PATH, so \`git genjob\` runs through a git alias for now (git config --global alias.genjob);"
            echo "      until PATH has it, git answers \`git genjob --help\` with the alias: \`git genjob -h\` and \`man -M $MANDIR git-genjob\` show the help"
        else
            echo "note: $BIN is not on PATH and alias.genjob is already set to something else (left alone)"
        fi
        echo "      add it to PATH for good:  export PATH=\"$BIN:\$PATH\"  (e.g. in ~/.profile), then: git config --global --unset alias.genjob"
        ;;
esac
mv "$NEW" "$MANIFEST"
echo "uninstall: ./install.sh --uninstall$( [ "$PREFIX" = "$HOME/.local" ] || printf ' --prefix %s' "$PREFIX") (removes what $MANIFEST lists, and the venv)"
