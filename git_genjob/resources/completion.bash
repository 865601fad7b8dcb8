# bash completion for git genjob (git genjob completion bash). `git genjob <TAB>` goes through
# git's own completion, which calls _git_genjob; `git-genjob <TAB>` through the `complete` below.
# Each reply is click's: `git genjob` run with _GIT_GENJOB_COMPLETE=bash_complete.
_git_genjob_reply() {  # $1: the word being completed, as an index into the words "$2"
    local IFS=$'\n' response completion type value
    response=$(env COMP_WORDS="$2" COMP_CWORD="$1" _GIT_GENJOB_COMPLETE=bash_complete git genjob 2>/dev/null)
    COMPREPLY=()
    for completion in $response; do
        IFS=',' read -r type value <<< "$completion"
        case $type in
            dir) COMPREPLY=(); compopt -o dirnames 2>/dev/null ;;
            file) COMPREPLY=(); compopt -o default 2>/dev/null ;;
            plain) COMPREPLY+=("$value") ;;
        esac
    done
    return 0
}

_git_genjob() {  # git's completion: COMP_WORDS holds `git [options] genjob ...`
    local idx=${__git_cmd_idx:-1} IFS=' '
    _git_genjob_reply $((COMP_CWORD - idx)) "git-genjob ${COMP_WORDS[*]:idx+1}"
}

_git_genjob_completion() {
    local IFS=' '
    _git_genjob_reply "$COMP_CWORD" "${COMP_WORDS[*]}"
}

complete -o nosort -F _git_genjob_completion git-genjob 2>/dev/null || complete -F _git_genjob_completion git-genjob
