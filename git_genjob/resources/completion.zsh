#compdef git-genjob
# zsh completion for git genjob (git genjob completion zsh): `git-genjob <TAB>`, and
# `git genjob <TAB>` through zsh's git completion, which calls _git-genjob.

_git_genjob_completion() {
    local -a completions completions_with_descriptions response
    response=("${(@f)$(env COMP_WORDS="git-genjob ${words[2,-1]}" COMP_CWORD=$((CURRENT-1)) _GIT_GENJOB_COMPLETE=zsh_complete git genjob 2>/dev/null)}")
    for type key descr in ${response}; do
        if [[ "$type" == "plain" ]]; then
            if [[ "$descr" == "_" ]]; then
                completions+=("$key")
            else
                completions_with_descriptions+=("$key":"$descr")
            fi
        elif [[ "$type" == "dir" ]]; then
            _path_files -/
        elif [[ "$type" == "file" ]]; then
            _path_files -f
        fi
    done
    if [ -n "$completions_with_descriptions" ]; then
        _describe -V unsorted completions_with_descriptions -U
    fi
    if [ -n "$completions" ]; then
        compadd -U -V unsorted -a completions
    fi
}

_git-genjob() { _git_genjob_completion "$@"; }

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _git_genjob_completion "$@"
else
    compdef _git_genjob_completion git-genjob
fi
