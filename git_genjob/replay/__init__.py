"""The replay plane: the model-answer cache (SPEC §7).

Owns normalization, the fingerprinted request and the hits log line, libgit2-free (`request`),
the cache ledger in refs/genjob/replays and drift (`cache`), the one HTTP POST the model
generators and `ask` share (`web`, which imports nothing of the repository), and the work
behind the cache commands: ask, ls, show, explain (`commands`).

May import: the documents, storage and planner planes and this package.
"""
