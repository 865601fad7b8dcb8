"""The planner plane: the queue side of a job (SPEC §4, §5 submit/status/show/bundle).

Owns minting and listing jobs (`queue`), `git genjob init` (`initrepo`), the trust store
in `.genjob/` (`trust`) and the atomic writes of user files (`userfiles`).

May import: the documents and storage planes and this package.
"""
