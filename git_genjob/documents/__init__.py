"""The documents plane: bytes in, typed values out (SPEC §2, §4's state machine, §6 checks 1-5, §8).

Owns canonical JSON (`canonical`), the job (`job`), the attempt and meta documents
(`attempts`), receipts, DSSE and in-toto (`receipt`), Ed25519 keys (`keys`), the path and
secret rules (`paths`, `secretscan`), the states and events and their one table of moves
(`states`), `.genjob/config.toml` (`config`) and every error and exit code (`errors`).

May import: only this package. Never pygit2 and never a storage module; `config` reads
through a store it is handed.
"""
