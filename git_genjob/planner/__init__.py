"""The planner plane: the queue side of a job (SPEC §4, §5 submit/status/show/bundle).

Owns minting and listing jobs (`queue`), what submit checks before it mints one
(`submitchecks`), reading the live queue (`live`), a job as a status
and archive row (`rows`), the job ledger, the one writer of every job event from submit to the
archive move (`ledger`), `git genjob init` (`initrepo`), the trust store
in `.genjob/`, the planner's key and check 9 (`trust`) and the atomic writes of user files
(`userfiles`).

May import: the documents and storage planes and this package.
"""
