#!/bin/sh
# git-genjob hook: @HOOK@ (installed by `git genjob init --hooks`; re-running init replaces it)
HOOK=@HOOK@
CHAINED="${0%/*}/$HOOK.genjob-chained"
if [ -x "$CHAINED" ]; then
    # The user's own hook runs first, with the same arguments and the same stdin.
    STDIN=$(mktemp "${TMPDIR:-/tmp}/genjob-hook.XXXXXX") || exit 1
    trap 'rm -f "$STDIN"' EXIT
    cat > "$STDIN"
    "$CHAINED" "$@" < "$STDIN" || exit $?
    exec < "$STDIN"
fi
# Nothing to check, decided without starting Python (the same tests open each Python hook):
case $HOOK in
pre-commit)  # no live job holds a path
    LIVE=$(git for-each-ref --count=1 --format=x refs/genjob/jobs/ 2>/dev/null) || LIVE=x
    [ -n "$LIVE" ] || exit 0 ;;
commit-msg)  # no line of the message could be a Genjob-* trailer or genjob's Assisted-by
    grep -qiE '^[[:space:]]*(genjob-|assisted-by:.*genjob)' "$1" 2>/dev/null
    [ $? -ne 1 ] || exit 0 ;;
pre-push)  # no pushed commit has a message line that could name a job (one rev-list per ref),
    # and no summary note is pushed (each must be the rendering of its commit's verified receipt)
    LINES= CHECK=
    while read -r LREF LSHA RREF RSHA; do
        LINES="$LINES$LREF $LSHA $RREF $RSHA
"
        case $LSHA in *[!0]*) [ "$RREF" != refs/notes/genjob ] || CHECK=1 ;; esac
        case $RREF in refs/genjob/* | refs/notes/*) continue ;; esac
        case $LSHA in *[!0]*) ;; *) continue ;; esac
        case $RSHA in *[!0]*) HIDE=$RSHA ;; *) HIDE= ;; esac
        FOUND=$(git rev-list -n1 --ignore-missing --regexp-ignore-case --extended-regexp \
            '--grep=^[[:space:]]*(genjob-|assisted-by:.*genjob)' "$LSHA" --not "--glob=refs/remotes/${1:-origin}/*" $HIDE 2>/dev/null) || FOUND=x
        [ -z "$FOUND" ] || CHECK=1
    done
    [ -n "$CHECK" ] || exit 0
    exec 0<<LINES_END
$LINES
LINES_END
    ;;
esac
# One Python start: no site-packages until the hook needs them (git_genjob is found at PKG), and
# not the work tree on sys.path (-P: a file of the repository never shadows a module).
PY='@PYTHON@'
PKG='@PYTHONPATH@'
if [ -z "$PY" ]; then  # a shared hooks directory: this clone's own config names its interpreter
    PY=$(git config --get genjob.hookpython)
    PKG=$(git config --get genjob.hookpythonpath)
fi
if [ -n "$PY" ] && [ -x "$PY" ] && [ -f "$PKG/git_genjob/entry.py" ]; then
    "$PY" -S -P -c 'import sys; sys.path.append(sys.argv[1]); from git_genjob.entry import main; sys.exit(main(sys.argv[2:]))' "$PKG" hook "$HOOK" "$@"
elif command -v git-genjob >/dev/null 2>&1; then
    git-genjob hook "$HOOK" "$@"
elif [ -x "${GENJOB_BIN:-$HOME/.local/bin}/git-genjob" ]; then  # install.sh's default, not on PATH
    "${GENJOB_BIN:-$HOME/.local/bin}/git-genjob" hook "$HOOK" "$@"
elif git config --get alias.genjob >/dev/null 2>&1; then  # install.sh's alias, another BIN
    git genjob hook "$HOOK" "$@"
else
    echo "git-genjob $HOOK hook: git-genjob is not installed (./install.sh), or remove this hook: $0" >&2
    exit 1
fi
