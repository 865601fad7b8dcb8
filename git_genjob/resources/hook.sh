#!/bin/sh
# git-genjob hook: @HOOK@ (installed by `git genjob init --hooks`; re-running init replaces it)
HOOK=@HOOK@
DIR=$(dirname "$0")
STDIN=$(mktemp "${TMPDIR:-/tmp}/genjob-hook.XXXXXX") || exit 1
trap 'rm -f "$STDIN"' EXIT
cat > "$STDIN"
if [ -x "$DIR/$HOOK.genjob-chained" ]; then
    "$DIR/$HOOK.genjob-chained" "$@" < "$STDIN" || exit $?
fi
PY='@PYTHON@'
if [ -x "$PY" ] && "$PY" -c 'import git_genjob' 2>/dev/null; then
    "$PY" -m git_genjob hook "$HOOK" "$@" < "$STDIN"
elif command -v git-genjob >/dev/null 2>&1; then
    git-genjob hook "$HOOK" "$@" < "$STDIN"
else
    echo "git-genjob $HOOK hook: git-genjob is not installed (./install.sh), or remove .git/hooks/$HOOK" >&2
    exit 1
fi
